"""The native test harness runs a transform as the host does."""

import json

import pytest

import sluice_transform as sluice
from sluice_transform import CHANGE_TYPE, ChangeType, Record, RowError, column
from sluice_transform.testing import TestBatch, run


class WonDeals(sluice.Transform):
    def init(self, params):
        self.stage = params.get("stage", "closedwon")

    def transform(self, batch, out):
        for row in batch.rows():
            deal = row["documentId"]
            if deal is None:
                out.reject(row, "The deal has no documentId.")
            elif row.change_type == ChangeType.DELETE:
                out.emit(row, Record.tombstone(deal))
            elif row["fullDocument.stage"] == self.stage:
                value = json.dumps({"id": deal}, separators=(",", ":"))
                out.emit(row, Record(key=deal, value=value, headers={"op": row.change_type.value}))


BATCH = TestBatch(
    {"documentId": ["d1", "d2", None, "d4"], "fullDocument.stage": ["closedwon", "new", None, "closedwon"]},
    change_types=[ChangeType.INSERT, ChangeType.DELETE, ChangeType.INSERT, ChangeType.UPDATE_POSTIMAGE],
)


def test_records_rows_and_rejections_come_back_in_order():
    result = run(WonDeals, BATCH, params={"stage": "closedwon"})
    assert result.rows == [0, 1, 3]
    assert [r.key for r in result.records] == [b"d1", b"d2", b"d4"]
    assert result.records[0].value == b'{"id":"d1"}'
    assert result.records[0].headers == (("op", b"insert"),)
    assert result.records[1].value is None
    assert result.records[2].headers == (("op", b"update_postimage"),)
    assert result.rejected == [(2, "The deal has no documentId.")]


def test_selections_work_natively_and_encoding_points_to_preview():
    class Selects(sluice.Transform):
        def transform(self, batch, out):
            inserts = batch.select_change_types(ChangeType.INSERT)
            won = batch.select_where("fullDocument.stage", "==", "closedwon", within=inserts)
            assert inserts == [0, 2] and won == [0]
            assert batch.select_where("documentId", "is null") == [2]
            out.encode(won, key=column("documentId"), headers={"op": CHANGE_TYPE})

    with pytest.raises(NotImplementedError, match="sluice preview"):
        run(Selects, BATCH)


def test_errors_and_missing_columns_surface():
    class Fails(sluice.Transform):
        def transform(self, batch, out):
            raise RowError(batch.row(1), "bad deal")

    with pytest.raises(RowError) as error:
        run(Fails, BATCH)
    assert error.value.row == 1

    class Missing(sluice.Transform):
        def transform(self, batch, out):
            batch.column("nope")

    with pytest.raises(sluice.BatchError, match="no column named `nope`"):
        run(Missing, BATCH)
    with pytest.raises(ValueError, match="same number of rows"):
        TestBatch({"a": [1], "b": [1, 2]})


def test_a_row_rejected_twice_keeps_its_first_reason_as_on_the_host():
    class RejectsTwice(sluice.Transform):
        def transform(self, batch, out):
            row = next(iter(batch.rows()))
            out.reject(row, "first reason")
            out.reject(row, "second reason")

    assert run(RejectsTwice, BATCH).rejected == [(0, "first reason")]


def test_records_cross_to_the_host_in_runs_of_one_framing():
    from sluice_transform import Framing, Output, Record, avro_schema, json_schema

    calls = []

    class Host:
        def emit_packed(self, lists):
            calls.append(("plain", list(lists["source_rows"])))

        def emit_framed(self, lists, framing):
            kind = (framing.value or framing.key).kind
            calls.append((kind, list(lists["source_rows"])))

    out = Output(Host())
    out.emit(0, Record(value="plain"))
    out.emit_framed(1, Framing(value=json_schema('{"type":"object"}')), Record(value="{}"))
    out.emit_framed(2, Framing(value=json_schema('{"type":"object"}')), Record(value="{}"))
    out.emit_framed(3, Framing(key=avro_schema('"string"')), Record(key=b"\x02k"))
    out.emit(3, Record())
    out.flush()
    assert calls == [
        ("plain", [0]),
        ("json-schema", [1, 2]),
        ("avro", [3]),
        ("plain", [3]),
    ]
