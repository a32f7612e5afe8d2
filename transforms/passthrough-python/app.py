"""Pass-through in Python: every change row as a JSON object of its data columns
(struct fields under dotted names) and its change columns, keyless. Reads rows one by
one, so it shows the SDK's row API.

Parameter `deletes_topic`: when set, delete rows go to that topic instead of the
pipeline's. Parameter `json_schema`: when set (a JSON Schema's text), the values are
framed with it: the host registers it and writes Confluent's wire format.
"""

import datetime
import json

import sluice_transform as sluice
from sluice_transform import ChangeType, Framing, Record, json_schema


def plain(value):
    """JSON for the values json cannot write: ISO-8601 dates and times, hex bytes."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


class Passthrough(sluice.Transform):
    def init(self, params):
        self.deletes_topic = params.get("deletes_topic")
        schema = params.get("json_schema")
        self.framing = Framing(value=json_schema(schema)) if schema else None

    def transform(self, batch, out):
        for row in batch.rows():
            value = row.to_dict()
            value["_change_type"] = row.change_type.value
            value["_commit_version"] = row.commit_version
            value["_commit_timestamp"] = row.commit_timestamp.isoformat()
            topic = self.deletes_topic if row.change_type == ChangeType.DELETE else None
            record = Record(value=json.dumps(value, default=plain, separators=(",", ":")), topic=topic)
            if self.framing:
                out.emit_framed(row, self.framing, record)
            else:
                out.emit(row, record)


Transformer = sluice.export(Passthrough)
