"""Packing records into the contract's flat form, natively."""

import pytest

from sluice_transform import ChangeType, Json, Params, Record, column, constant
from sluice_transform._packing import Packer


def test_keys_values_and_tombstones_share_one_buffer():
    packer = Packer()
    packer.add(0, Record(key="k1", value=b"v1"))
    packer.add(3, Record.tombstone("k2"))
    packer.add(4, Record(value="only"))
    lists = packer.lists()
    assert lists["data"] == b"k1v1k2only"
    assert lists["source_rows"] == [0, 3, 4]
    assert lists["key_lengths"] == [2, 2, -1]
    assert lists["value_lengths"] == [2, -1, 4]
    assert lists["topic_indexes"] == [] and lists["partitions"] == [] and lists["header_counts"] == []


def test_topics_partitions_and_headers_are_indexed():
    packer = Packer()
    packer.add(0, Record(value="a", topic="t1", headers=[("h", "x"), ("g", b"yz")]))
    packer.add(1, Record(value="b", partition=2, headers={"h": "w"}))
    packer.add(2, Record(value="c", topic="t1"))
    lists = packer.lists()
    assert lists["data"] == b"axyzbwc"
    assert lists["topics"] == ["t1"]
    assert lists["topic_indexes"] == [1, 0, 1]
    assert lists["partitions"] == [-1, 2, -1]
    assert lists["header_names"] == ["h", "g"]
    assert lists["header_counts"] == [2, 1, 0]
    assert lists["header_name_indexes"] == [0, 1, 0]
    assert lists["header_value_lengths"] == [1, 2, 1]


def test_change_types_parse_as_delta_spells_them():
    assert ChangeType.parse(" update_postimage") == ChangeType.UPDATE_POSTIMAGE
    with pytest.raises(ValueError, match="Unknown change type `upsert`"):
        ChangeType.parse("upsert")


def test_params_and_fields():
    params = Params([("a", "1")])
    assert params.get("a") == "1" and params.get("b", "x") == "x"
    with pytest.raises(ValueError, match="Parameter b is required"):
        params.require("b")
    assert Json({"id": column("id")}).fields == (("id", column("id")),)
    with pytest.raises(TypeError):
        constant([1])


def test_a_bad_record_is_refused_and_leaves_the_packer_as_it_was():
    packer = Packer()
    packer.add(0, Record(key="k", value="v"))
    with pytest.raises(TypeError, match="must be str or bytes, not int"):
        packer.add(1, Record(key="k2", value=7))
    with pytest.raises(TypeError):
        packer.add(1, Record(key="k2", value="v", headers=[("h", 1)]))
    lists = packer.lists()
    assert lists["data"] == b"kv"
    assert lists["source_rows"] == [0] and lists["key_lengths"] == [1] and lists["header_counts"] == []
