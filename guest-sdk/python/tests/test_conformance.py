"""The SDK conformance suite (guest-sdk/conformance/): the Python packer and the test
harness's selections must give what every SDK and the host give."""

import json
from pathlib import Path

import pytest

from sluice_transform import BatchError, ChangeType, Record
from sluice_transform._batch import Batch
from sluice_transform._packing import Packer
from sluice_transform.testing import Result, TestBatch, _MemoryHost

SUITE = Path(__file__).resolve().parents[2] / "conformance"


def cases(name):
    return json.loads((SUITE / name).read_text())["cases"]


def as_bytes(value):
    return bytes.fromhex(value["hex"]) if isinstance(value, dict) else value.encode()


def record(case_record):
    return Record(
        key=None if "key" not in case_record else as_bytes(case_record["key"]),
        value=None if "value" not in case_record else as_bytes(case_record["value"]),
        topic=case_record.get("topic"),
        partition=case_record.get("partition"),
        headers=[(name, as_bytes(value)) for name, value in case_record.get("headers", [])],
    )


def packing_failures(packer_class):
    """Names of the packing cases `packer_class` gets wrong, with what it made."""
    failures = []
    for case in cases("packing.json"):
        packer = packer_class()
        for case_record in case["records"]:
            packer.add(case_record["row"], record(case_record))
        made = dict(packer.lists(), data=packer.lists()["data"].hex())
        made = {name: list(value) if not isinstance(value, str) else value for name, value in made.items()}
        if made != case["packed"]:
            failures.append(f"{case['name']}: made {made}")
    return failures


def test_the_packer_makes_the_packed_lists_of_every_case():
    assert packing_failures(Packer) == []


def test_a_packer_that_keeps_empty_optional_lists_fails_the_suite():
    class Broken(Packer):
        def lists(self):
            return dict(super().lists(), partitions=self.partitions)

    failures = packing_failures(Broken)
    assert any(f.startswith("keys, values and tombstones") for f in failures), failures


def suite_batch():
    document = json.loads((SUITE / "selections.json").read_text())["batch"]
    convert = {
        "long": int,
        "double": float,
        "string": str,
        "boolean": bool,
        "binary": as_bytes,
    }
    columns = {
        column["name"]: [None if v is None else convert[column["type"]](v) for v in column["values"]]
        for column in document["columns"]
    }
    change_types = [ChangeType(name) for name in document["change_types"]]
    return Batch(_MemoryHost(TestBatch(columns, change_types=change_types), Result()))


@pytest.mark.parametrize("case", cases("selections.json"), ids=lambda case: case["name"])
def test_selections_match_the_host(case):
    batch = suite_batch()

    def select():
        if "select_change_types" in case:
            call = case["select_change_types"]
            types = [ChangeType(name) for name in call["types"]]
            return batch.select_change_types(*types, within=call.get("within"))
        call = case["select_where"]
        return batch.select_where(call["column"], call["op"], call["value"], within=call.get("within"))

    if "error" in case:
        with pytest.raises(BatchError) as error:
            select()
        assert case["error"] in str(error.value)
    else:
        assert list(select()) == case["rows"]
