"""Batches, rows and output, over a host: the real one inside a module (`_guest.py`)
or a table in memory in unit tests (`testing.py`). Nothing here imports the bindings."""

import datetime
from typing import Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

from ._model import COMPARISONS, JSON_ROW, BatchError, ChangeType, Field, Framing, Json, Record
from ._packing import Packer

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class Host(Protocol):
    """What a batch needs from whoever holds its rows."""

    def num_rows(self) -> int: ...

    def columns(self, names: List[str]) -> List[Tuple[str, list]]:
        """The named columns (all when `names` is empty) as Python values; raises
        BatchError naming a missing column."""

    def change_types(self) -> List[ChangeType]: ...

    def commit_versions(self) -> List[int]: ...

    def commit_timestamps(self) -> List[int]: ...

    def select_change_types(self, types: List[ChangeType], within: Optional[List[int]]) -> List[int]: ...

    def select_where(self, column: str, op: str, value: object, within: Optional[List[int]]) -> List[int]: ...

    def encode(
        self,
        rows: List[int],
        key: Optional[Field],
        value: Union[Json, str],
        delete_as_tombstone: bool,
        topic: Optional[str],
        headers: List[Tuple[str, Field]],
    ) -> int: ...

    def emit_packed(self, lists: dict) -> None: ...

    def emit_framed(self, lists: dict, framing: Framing) -> None: ...

    def reject(self, row: int, message: str) -> None: ...


class Row:
    """One change row: its index in the batch, change columns and values."""

    __slots__ = ("_batch", "index")

    def __init__(self, batch: "Batch", index: int):
        self._batch = batch
        self.index = index

    @property
    def change_type(self) -> ChangeType:
        """What happened to the row."""
        return self._batch.change_types()[self.index]

    @property
    def commit_version(self) -> int:
        """The Delta version that made the change."""
        return self._batch.commit_versions()[self.index]

    @property
    def commit_timestamp(self) -> datetime.datetime:
        """When the change was committed (UTC)."""
        return EPOCH + datetime.timedelta(microseconds=self._batch.commit_timestamps()[self.index])

    def __getitem__(self, column: str):
        return self._batch.column(column)[self.index]

    def get(self, column: str, default=None):
        """The column's value, or `default` when it is null."""
        value = self[column]
        return default if value is None else value

    def to_dict(self) -> Dict[str, object]:
        """Every data column (struct fields under dotted names), nulls left out."""
        out = {}
        for name, values in self._batch.all_columns().items():
            value = values[self.index]
            if value is not None:
                out[name] = value
        return out


class Batch:
    """One batch of change rows, in commit order. Columns are fetched from the host
    the first time they are read."""

    def __init__(self, host: Host):
        self._host = host
        self._len = host.num_rows()
        self._columns: Dict[str, list] = {}
        self._all = False
        self._change_types: Optional[List[ChangeType]] = None
        self._versions: Optional[List[int]] = None
        self._timestamps: Optional[List[int]] = None

    def __len__(self) -> int:
        return self._len

    def rows(self) -> Iterator[Row]:
        """Every row, in order."""
        return (Row(self, i) for i in range(self._len))

    def row(self, index: int) -> Row:
        """The row at `index`."""
        if not 0 <= index < self._len:
            raise IndexError(f"The batch has {self._len} rows, not row {index}.")
        return Row(self, index)

    def column(self, name: str) -> list:
        """A data column's values, one per row (dotted path for struct fields)."""
        if name not in self._columns:
            if self._all:
                raise BatchError(f"The batch has no column named `{name}`.")
            for col, values in self._host.columns([name]):
                self._columns[col] = values
        return self._columns[name]

    def all_columns(self) -> Dict[str, list]:
        """Every data column, by name."""
        if not self._all:
            for col, values in self._host.columns([]):
                self._columns.setdefault(col, values)
            self._all = True
        return self._columns

    def change_types(self) -> List[ChangeType]:
        """`_change_type` of each row."""
        if self._change_types is None:
            self._change_types = self._host.change_types()
        return self._change_types

    def commit_versions(self) -> List[int]:
        """`_commit_version` of each row."""
        if self._versions is None:
            self._versions = self._host.commit_versions()
        return self._versions

    def commit_timestamps(self) -> List[int]:
        """`_commit_timestamp` of each row, in microseconds since the epoch (UTC)."""
        if self._timestamps is None:
            self._timestamps = self._host.commit_timestamps()
        return self._timestamps

    def select_change_types(self, *types: ChangeType, within: Optional[Sequence[int]] = None) -> List[int]:
        """Indexes of the rows (of `within`, or of the batch) with one of these change
        types, in order. The host does the work."""
        return self._host.select_change_types(list(types), None if within is None else list(within))

    def select_where(
        self, column: str, op: str, value: object = None, within: Optional[Sequence[int]] = None
    ) -> List[int]:
        """Indexes of the rows (of `within`, or of the batch) where `column op value`
        holds; `op` is one of `==`, `!=`, `<`, `<=`, `>`, `>=`, `is null`,
        `is not null`. The host does the work."""
        if op not in COMPARISONS:
            raise ValueError(f"Unknown comparison `{op}`; use one of {', '.join(COMPARISONS)}.")
        return self._host.select_where(column, op, value, None if within is None else list(within))


class Output:
    """Where a transform puts its records, in order."""

    def __init__(self, host: Host):
        self._host = host
        self._packer = Packer()
        # The framing of the packed records: records cross in runs of one framing.
        self._framing: Optional[Framing] = None

    def emit(self, row: Union[Row, int], record: Record) -> None:
        """Emits a record made from `row` (a Row or its index)."""
        if self._framing is not None:
            self.flush()
        self._packer.add(row if isinstance(row, int) else row.index, record)

    def emit_framed(self, row: Union[Row, int], framing: Framing, record: Record) -> None:
        """Emits a record whose value (or key) the module encoded itself with its own
        schema (`Framing(value=avro_schema(...))`). The host registers the schemas in
        the pipeline's schema registry, checks the bytes decode with them and writes
        Confluent's wire format header before them. Make the framing once and reuse
        it."""
        if framing != self._framing:
            self.flush()
            self._framing = framing
        self._packer.add(row if isinstance(row, int) else row.index, record)

    def reject(self, row: Union[Row, int], message: str) -> None:
        """Marks a row as failed, with why; the transform carries on with the others."""
        self.flush()
        self._host.reject(row if isinstance(row, int) else row.index, message)

    def encode(
        self,
        rows: Sequence[int],
        key: Optional[Field] = None,
        value: Union[Json, str] = JSON_ROW,
        delete_as_tombstone: bool = False,
        topic: Optional[str] = None,
        headers: Sequence = (),
    ) -> int:
        """Has the host make one record per row in `rows`, natively: the key from a
        field (rendered as text), the value a `Json(...)` object, `JSON_ROW` or
        `TOMBSTONE`, deletes as tombstones when asked, headers from fields. Returns how
        many records it made. No value passes through Python, so this is the fast way."""
        pairs = list(headers.items() if isinstance(headers, dict) else headers)
        self.flush()
        return self._host.encode(list(rows), key, value, delete_as_tombstone, topic, pairs)

    def flush(self) -> None:
        """Sends the records emitted so far to the host (done for you)."""
        if len(self._packer):
            if self._framing is None:
                self._host.emit_packed(self._packer.lists())
            else:
                self._host.emit_framed(self._packer.lists(), self._framing)
            self._packer.clear()
        self._framing = None
