"""Unit tests for transforms, natively: a batch of rows in memory, the transform's
`init` and `transform` called as the host calls them, and the records it emitted.

    from sluice_transform import ChangeType
    from sluice_transform.testing import TestBatch, run

    batch = TestBatch(
        {"documentId": ["d1", "d2"], "fullDocument.stage": ["closedwon", None]},
        change_types=[ChangeType.INSERT, ChangeType.DELETE],
    )
    result = run(WonDeals, batch, params={"stage": "closedwon"})
    assert result.records[0].key == b"d1"

Row access and `select_change_types`/`select_where` work as in the host. `out.encode`
is the host's native encoder, which only runs in the host: test such transforms with
`sluice preview` on a small table.
"""

import datetime
import operator
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ._batch import EPOCH, Batch, Output
from ._model import BatchError, ChangeType, Params, Record, RowError

_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _kind(value: object) -> str:
    """A value's type as the host's messages name it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "floating point"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary"
    return "nested"


def _comparable(value: object, constant: object) -> bool:
    """Whether the host compares a column value with a constant: numbers with numbers,
    text with text, booleans with booleans (a bool is not a number there)."""
    if isinstance(value, bool) or isinstance(constant, bool):
        return isinstance(value, bool) and isinstance(constant, bool)
    if isinstance(value, (int, float)):
        return isinstance(constant, (int, float))
    return isinstance(value, str) and isinstance(constant, str)


def _is_nan(value: object) -> bool:
    """NaN compares as nothing on the host, not even as unequal."""
    return isinstance(value, float) and value != value


class TestBatch:
    """A batch held in memory: columns by name (struct fields by dotted path), one
    value per row, and each row's change type (inserts by default), commit version (1)
    and commit time (the epoch)."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        columns: Mapping[str, Sequence[object]],
        change_types: Optional[Sequence[ChangeType]] = None,
        commit_versions: Optional[Sequence[int]] = None,
        commit_timestamps: Optional[Sequence[datetime.datetime]] = None,
    ):
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"Every column needs the same number of rows, not {sorted(lengths)}.")
        rows = lengths.pop() if lengths else len(change_types or ())
        self._columns = {name: list(values) for name, values in columns.items()}
        self._rows = rows
        self._change_types = list(change_types or [ChangeType.INSERT] * rows)
        self._versions = list(commit_versions or [1] * rows)
        times = commit_timestamps or [EPOCH] * rows
        self._timestamps = [(t - EPOCH) // datetime.timedelta(microseconds=1) for t in times]
        for name, values in (
            ("change_types", self._change_types),
            ("commit_versions", self._versions),
            ("commit_timestamps", self._timestamps),
        ):
            if len(values) != rows:
                raise ValueError(f"{name} has {len(values)} entries for {rows} rows.")


@dataclass
class Result:
    """What a transform made of a batch: records (with the row each came from) and
    rejected rows, in order."""

    records: List[Record] = field(default_factory=list)
    rows: List[int] = field(default_factory=list)
    rejected: List[Tuple[int, str]] = field(default_factory=list)


class _MemoryHost:
    """`_batch.Host` over a TestBatch, collecting what the transform emits."""

    def __init__(self, batch: TestBatch, result: Result):
        self._batch = batch
        self._result = result

    def num_rows(self) -> int:
        return self._batch._rows

    def columns(self, names: List[str]) -> List[Tuple[str, list]]:
        columns = self._batch._columns
        for name in names:
            if name not in columns:
                raise BatchError(f"The batch has no column named `{name}`.")
        return [(name, columns[name]) for name in (names or list(columns))]

    def change_types(self) -> List[ChangeType]:
        return self._batch._change_types

    def commit_versions(self) -> List[int]:
        return self._batch._versions

    def commit_timestamps(self) -> List[int]:
        return self._batch._timestamps

    def _rows(self, within) -> Sequence[int]:
        if within is None:
            return range(self._batch._rows)
        for row in within:
            if row >= self._batch._rows:
                raise BatchError(f"Row {row} is out of range: the batch has {self._batch._rows} rows.")
        return within

    def select_change_types(self, types, within):
        return [i for i in self._rows(within) if self._batch._change_types[i] in types]

    def select_where(self, column, op, value, within):
        values = self.columns([column])[0][1]
        rows = self._rows(within)
        if op == "is null":
            return [i for i in rows if values[i] is None]
        if op == "is not null":
            return [i for i in rows if values[i] is not None]
        selected = []
        for i in rows:
            if values[i] is None or value is None:
                continue
            if not _comparable(values[i], value):
                raise BatchError(f"Cannot compare column `{column}` ({_kind(values[i])}) with {value!r}.")
            if not (_is_nan(values[i]) or _is_nan(value)) and _COMPARE[op](values[i], value):
                selected.append(i)
        return selected

    def encode(self, rows, key, value, delete_as_tombstone, topic, headers):
        raise NotImplementedError(
            "out.encode runs in the host's native encoder, not in unit tests: "
            "test this transform with `sluice preview` on a small table."
        )

    def emit_packed(self, lists: dict) -> None:
        self._result.records.extend(_unpack(lists))
        self._result.rows.extend(lists["source_rows"])

    def emit_framed(self, lists: dict, framing) -> None:
        # The host frames them; in tests the records keep the module's bytes.
        self.emit_packed(lists)

    def reject(self, row: int, message: str) -> None:
        # As on the host: one rejection per row, the first reason kept.
        if all(rejected != row for rejected, _ in self._result.rejected):
            self._result.rejected.append((row, message))


def _unpack(lists: dict) -> List[Record]:
    """Records back from the packed form."""
    data, at, header = lists["data"], 0, 0
    topics, names = lists["topics"], lists["header_names"]
    records = []
    for i in range(len(lists["source_rows"])):
        parts = []
        for length in (lists["key_lengths"][i], lists["value_lengths"][i]):
            parts.append(None if length < 0 else data[at : at + length])
            at += max(length, 0)
        headers = []
        for _ in range(lists["header_counts"][i] if lists["header_counts"] else 0):
            length = lists["header_value_lengths"][header]
            headers.append((names[lists["header_name_indexes"][header]], data[at : at + length]))
            at += length
            header += 1
        topic_index = lists["topic_indexes"][i] if lists["topic_indexes"] else 0
        partition = lists["partitions"][i] if lists["partitions"] else -1
        records.append(
            Record(
                key=parts[0],
                value=parts[1],
                topic=topics[topic_index - 1] if topic_index else None,
                partition=None if partition < 0 else partition,
                headers=tuple(headers),
            )
        )
    return records


def run(transform_class, batch: TestBatch, params: Optional[Dict[str, str]] = None) -> Result:
    """Makes the transform, calls `init(params)` and `transform` on `batch` as the host
    does, and returns its records (keys, values and header values as bytes) and
    rejected rows. A RowError or BatchError it raises is raised here."""
    transform = transform_class()
    transform.init(Params((params or {}).items()))
    result = Result()
    host = _MemoryHost(batch, result)
    out = Output(host)
    transform.transform(Batch(host), out)
    out.flush()
    return result


__all__ = ["Result", "RowError", "TestBatch", "run"]
