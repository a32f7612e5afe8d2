"""The SDK's plain values: change types, records, errors, parameters and the fields
the host encodes. Nothing here touches the host, so it runs (and is tested) natively."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Mapping, Optional, Sequence, Tuple, Union

Bytes = Union[str, bytes]


class ChangeType(Enum):
    """What happened to a row, as Delta's `_change_type` column spells it."""

    INSERT = "insert"
    UPDATE_PREIMAGE = "update_preimage"
    UPDATE_POSTIMAGE = "update_postimage"
    DELETE = "delete"

    @staticmethod
    def parse(name: str) -> "ChangeType":
        """The change type called `name` (surrounding blanks ignored)."""
        try:
            return ChangeType(name.strip())
        except ValueError:
            raise ValueError(
                f"Unknown change type `{name.strip()}`; use insert, update_preimage, "
                "update_postimage or delete."
            ) from None


@dataclass
class Record:
    """A Kafka record to produce. `value=None` makes a tombstone; `topic=None` and
    `partition=None` take the pipeline's topic and Kafka's partitioner. Strings are
    sent as UTF-8."""

    key: Optional[Bytes] = None
    value: Optional[Bytes] = None
    topic: Optional[str] = None
    partition: Optional[int] = None
    headers: Sequence[Tuple[str, Bytes]] = field(default_factory=tuple)

    @staticmethod
    def tombstone(key: Bytes, topic: Optional[str] = None) -> "Record":
        """A record with a key and no value: deletes the key on a compacted topic."""
        return Record(key=key, value=None, topic=topic)


class RowError(Exception):
    """Raise from `transform` when one row cannot be transformed: the batch's records
    are discarded and the pipeline's error policy decides what happens to the row."""

    def __init__(self, row, message: str):
        super().__init__(message)
        self.row = row if isinstance(row, int) else row.index
        self.message = message


class BatchError(Exception):
    """Raise from `transform` when the batch as a whole cannot be transformed. Any
    other exception is reported the same way, with its type and message."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Params(Mapping[str, str]):
    """The pipeline's `[transform.params]`, all strings."""

    def __init__(self, pairs: Iterable[Tuple[str, str]] = ()):
        self._values = dict(pairs)

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def require(self, name: str) -> str:
        """The parameter's value; an error naming it when it is missing."""
        if name not in self._values:
            raise ValueError(f"Parameter {name} is required; set it under [transform.params].")
        return self._values[name]


@dataclass(frozen=True)
class Field:
    """Where a value the host encodes comes from: build one with `column`,
    `substring`, `constant`, `CHANGE_TYPE`, `COMMIT_VERSION` or `COMMIT_TIMESTAMP`."""

    kind: str
    name: Optional[str] = None
    pos: int = 0
    length: int = 0
    constant: object = None


def column(name: str) -> Field:
    """A column's value, typed as in the table (dotted path for struct fields)."""
    return Field("column", name)


def substring(name: str, pos: int, length: int) -> Field:
    """Spark's `substring(name, pos, length)`: `length` characters from the 1-based
    character position `pos`."""
    return Field("substring", name, pos, length)


def constant(value: object) -> Field:
    """A constant: None, a bool, an int, a float or a str."""
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"A constant must be None, bool, int, float or str, not {type(value).__name__}.")
    return Field("constant", constant=value)


CHANGE_TYPE = Field("change_type")
"""The row's `_change_type`, as Delta spells it."""
COMMIT_VERSION = Field("commit_version")
"""The row's `_commit_version`."""
COMMIT_TIMESTAMP = Field("commit_timestamp")
"""The row's `_commit_timestamp`, as ISO-8601 text."""


@dataclass(frozen=True)
class Json:
    """Record values as a JSON object of these fields, in order; null values are left
    out, as Spark's `to_json` does."""

    fields: Tuple[Tuple[str, Field], ...]

    def __init__(self, fields: Union[Mapping[str, Field], Iterable[Tuple[str, Field]]]):
        items = fields.items() if isinstance(fields, Mapping) else fields
        object.__setattr__(self, "fields", tuple(items))


JSON_ROW = "json-row"
"""Record values as a JSON object of every data column, nested structs kept, as
Spark's `to_json(struct(*))` does."""
TOMBSTONE = "tombstone"
"""No record values: tombstones."""

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "is null", "is not null")
"""The operators `Batch.select_where` takes."""


@dataclass(frozen=True)
class OwnSchema:
    """A schema the module encodes its own values or keys with, for
    `out.emit_framed` (contract 1.1). `kind` is "avro", "json-schema" or "protobuf";
    `name` is the Protobuf message's full name (the file's first when None), or for
    Avro and JSON Schema the record name for record-name subjects when the schema names
    none."""

    kind: str
    text: str
    name: Optional[str] = None


def avro_schema(text: str, name: Optional[str] = None) -> OwnSchema:
    """An Avro schema (its JSON text)."""
    return OwnSchema("avro", text, name)


def json_schema(text: str, name: Optional[str] = None) -> OwnSchema:
    """A JSON Schema; the bytes framed with it are JSON text."""
    return OwnSchema("json-schema", text, name)


def protobuf_schema(text: str, message: Optional[str] = None) -> OwnSchema:
    """A `.proto` file's text and the message (full name) the bytes are."""
    return OwnSchema("protobuf", text, message)


@dataclass(frozen=True)
class Framing:
    """What `out.emit_framed` frames: keys, values or both, each with its schema."""

    key: Optional[OwnSchema] = None
    value: Optional[OwnSchema] = None
