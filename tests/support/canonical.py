"""One text line per change-feed row, the same whichever engine read the row.

`canonical_line(row)` takes a row as a dict of logical column name -> value, from pyarrow
(`RecordBatch.to_pylist()`) or from Spark (`spark_row_to_python(row, schema)` below, or
`Row.asDict(recursive=True)` for tables without maps), and renders the data columns plus
`_change_type` and `_commit_version` as a JSON object with sorted keys.
`_commit_timestamp` is left out: without in-commit timestamps it is the commit file's
modification time, which changes whenever a table is copied.

Values are normalised so that both sources agree:

| value | rendered as |
| --- | --- |
| null | null (kept, so a missing column differs from a null one) |
| bool | true / false |
| int (byte, short, int, long) | JSON integer |
| float (float, double) | JSON number, Python's shortest round-trip repr (a float column's value is widened to double by both sources, e.g. 1.100000023841858); NaN, Infinity, -Infinity as strings "NaN", "Infinity", "-Infinity" |
| decimal.Decimal | string, trailing zeros dropped, never in exponent form ("1.5", "10", "0", "-0.001") |
| date | "YYYY-MM-DD" |
| timestamp | "YYYY-MM-DDTHH:MM:SS.ffffffZ": aware values converted to UTC, naive ones taken as UTC (Spark's naive datetimes are in the process's local time, which must be UTC; timestamp_ntz is naive in both sources) |
| binary (bytes, bytearray, memoryview) | standard base64 string |
| str | str |
| list (array) | list, elements rendered recursively, order kept |
| map (pyarrow: list of (key, value) tuples) | list of [key, value] lists, rendered recursively, sorted by the rendered key's JSON |
| struct (dict) | object with sorted keys, rendered recursively |

Spark's `asDict(recursive=True)` turns a map into a dict, which cannot be told from a struct:
`spark_row_to_python` walks the schema and gives maps as pyarrow does.
"""

import base64
import datetime as _dt
import decimal
import json
import math

EXCLUDED_COLUMNS = frozenset({"_commit_timestamp"})


def canonical_line(row):
    """The row as one JSON line with sorted keys, `_commit_timestamp` left out."""
    return json.dumps(
        {str(k): normalize(v) for k, v in row.items() if k not in EXCLUDED_COLUMNS},
        sort_keys=True,
        allow_nan=False,
    )


def normalize(value):
    """The JSON-ready form of one value (see the module's table)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, str):
        return value
    if isinstance(value, _dt.datetime):  # before date: datetime is a date subclass
        return _timestamp(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(type(item) is tuple and len(item) == 2 for item in value):
        # pyarrow gives map<k, v> as a list of plain 2-tuples; arrays come as lists and
        # structs as dicts, never as plain tuples.
        pairs = [[normalize(k), normalize(v)] for k, v in value]
        pairs.sort(key=lambda kv: json.dumps(kv[0], sort_keys=True))
        return pairs
    if isinstance(value, (list, tuple)) and not hasattr(value, "asDict"):
        return [normalize(v) for v in value]
    if hasattr(value, "asDict"):  # a pyspark Row that was not converted
        return normalize(value.asDict(recursive=True))
    raise TypeError(f"no canonical form for {type(value).__name__}: {value!r}")


def _decimal(value):
    if not value.is_finite():
        return str(value)
    text = format(value.normalize(), "f")
    return "0" if text == "-0" else text


def _timestamp(value):
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return f"{value.year:04d}-{value:%m-%dT%H:%M:%S.%f}Z"


def spark_row_to_python(row, schema):
    """A pyspark Row as pyarrow's `to_pylist()` would give it: structs as dicts, maps as
    lists of (key, value) tuples, binary as bytes. `schema` is the DataFrame's StructType."""
    return _spark_value(row, schema)


def _spark_value(value, data_type):
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(data_type, T.StructType):
        return {f.name: _spark_value(value[i], f.dataType) for i, f in enumerate(data_type.fields)}
    if isinstance(data_type, T.ArrayType):
        return [_spark_value(v, data_type.elementType) for v in value]
    if isinstance(data_type, T.MapType):
        return [
            (_spark_value(k, data_type.keyType), _spark_value(v, data_type.valueType))
            for k, v in value.items()
        ]
    if isinstance(data_type, T.BinaryType):
        return bytes(value)
    return value
