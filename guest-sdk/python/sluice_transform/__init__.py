"""The Python SDK for Sluice transforms.

A transform reads a batch of Delta change rows and emits Kafka records::

    import json
    import sluice_transform as sluice
    from sluice_transform import ChangeType, Record

    class Inserts(sluice.Transform):
        def transform(self, batch, out):
            for row in batch.rows():
                if row.change_type == ChangeType.INSERT:
                    value = json.dumps(row.to_dict(), default=str)
                    out.emit(row, Record(key=str(row["id"]), value=value))

    Transformer = sluice.export(Inserts)

Two ways to work on a batch:

- rows and columns (`batch.rows()`, `row["name"]`, `batch.column("name")`), with
  `out.emit(row, Record(...))`: any logic, every value passes through Python;
- host helpers (`batch.select_change_types`, `batch.select_where`, `out.encode`): the
  module describes the records and the host selects and encodes them natively, about
  as fast as a Rust module. Prefer them when they can say what you need.

Raise `RowError(row, message)` to fail one row and `BatchError(message)` (or any
exception) to fail the batch; the pipeline's error policy decides what follows.

`sluice_transform.testing` runs a transform on rows in memory, natively, for unit
tests.
"""

import importlib.util

from . import log, state
from ._model import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    JSON_ROW,
    TOMBSTONE,
    BatchError,
    ChangeType,
    Field,
    Framing,
    Json,
    OwnSchema,
    Params,
    Record,
    RowError,
    avro_schema,
    column,
    constant,
    json_schema,
    protobuf_schema,
    substring,
)

from ._batch import Batch, Output, Row


class Transform:
    """Subclass this: `init` runs once per instance with the pipeline's parameters,
    `transform` once per batch."""

    def init(self, params: Params) -> None:
        """Reads the pipeline's `[transform.params]`. Raise to stop the pipeline with
        your message."""

    def transform(self, batch: Batch, out: Output) -> None:
        """Turns one batch of change rows into records, emitted in order into `out`."""
        raise NotImplementedError("Implement transform(self, batch, out).")


def export(transform_class):
    """Makes `transform_class` the module's transformer; assign the result to a
    module-level `Transformer`: `Transformer = sluice_transform.export(MyTransform)`."""
    # Outside a module (unit tests) there are no bindings and nothing to export.
    if importlib.util.find_spec("wit_world") is None:
        return transform_class
    from ._guest import export as guest_export

    return guest_export(transform_class)


__all__ = [
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "JSON_ROW",
    "TOMBSTONE",
    "Batch",
    "BatchError",
    "ChangeType",
    "Field",
    "Framing",
    "Json",
    "OwnSchema",
    "Output",
    "Params",
    "Record",
    "Row",
    "RowError",
    "Transform",
    "avro_schema",
    "column",
    "constant",
    "export",
    "json_schema",
    "log",
    "protobuf_schema",
    "state",
    "substring",
]
