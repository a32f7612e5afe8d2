"""The pipeline's keyed state (contract 1.2; the pipeline needs a `[state]` section):
values by key, kept across batches and committed exactly once with the batch's
records.

Keys and values are bytes (a `str` is taken as UTF-8). Text, integers, floats and JSON
are stored as UTF-8 text, as every SDK stores them, so `sluice state` shows them and a
module in another language reads them::

    from sluice_transform import state

    count = state.add(f"open/{account}", 1)  # a counter; removed when it reaches 0
    state.put_str(f"deal/{deal}", account)
    for key, value in state.entries(b"deal/"):
        ...

Outside a module (unit tests) the state is a dict in memory: `state.put` seeds it and
`state.clear()` empties it.
"""

import json
from typing import Any, Iterator, List, Optional, Tuple, Union

Bytes = Union[bytes, str]

#: Entries a scan asks for at a time while iterating.
PAGE = 256

try:
    from wit_world.imports import state as _host
except ImportError:
    _host = None

#: The state outside a module.
_native: dict = {}


def _bytes(value: Bytes) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"state keys and values are str or bytes, not {type(value).__name__}")


def get(key: Bytes) -> Optional[bytes]:
    """The value under `key`, or None."""
    if _host is not None:
        return _host.get(_bytes(key))
    return _native.get(_bytes(key))


def get_many(keys: List[Bytes]) -> List[Optional[bytes]]:
    """The values under `keys`, in order, in one host call."""
    keys = [_bytes(key) for key in keys]
    if _host is not None:
        return _host.get_many(keys)
    return [_native.get(key) for key in keys]


def put(key: Bytes, value: Bytes) -> None:
    """Sets the value under `key`."""
    if _host is not None:
        _host.put(_bytes(key), _bytes(value))
    else:
        _native[_bytes(key)] = _bytes(value)


def delete(key: Bytes) -> None:
    """Removes `key`; removing an absent key does nothing."""
    if _host is not None:
        _host.delete(_bytes(key))
    else:
        _native.pop(_bytes(key), None)


def scan(prefix: Bytes = b"", after: Optional[Bytes] = None, limit: int = PAGE) -> List[Tuple[bytes, bytes]]:
    """Up to `limit` (key, value) pairs whose keys start with `prefix`, in byte order
    of their keys, after `after` when given."""
    prefix = _bytes(prefix)
    after = None if after is None else _bytes(after)
    if _host is not None:
        return [(entry.key, entry.value) for entry in _host.scan(prefix, after, limit)]
    keys = sorted(k for k in _native if k.startswith(prefix) and (after is None or k > after))
    return [(key, _native[key]) for key in keys[:limit]]


def entries(prefix: Bytes = b"") -> Iterator[Tuple[bytes, bytes]]:
    """Every (key, value) pair whose key starts with `prefix`, a page at a time."""
    after = None
    while True:
        page = scan(prefix, after, PAGE)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1][0]


def get_str(key: Bytes) -> Optional[str]:
    """The text under `key`; None when absent or not UTF-8."""
    value = get(key)
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def put_str(key: Bytes, value: str) -> None:
    """Sets `key` to `value`, as UTF-8."""
    put(key, value.encode("utf-8"))


def get_int(key: Bytes) -> Optional[int]:
    """The integer under `key` (stored as decimal text); None when absent or not one."""
    text = get_str(key)
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def put_int(key: Bytes, value: int) -> None:
    """Sets `key` to `value`, as decimal text."""
    put_str(key, str(int(value)))


def add(key: Bytes, delta: int) -> int:
    """Adds `delta` to the counter under `key` (absent counts as 0) and returns the new
    value; a counter that reaches 0 is removed."""
    value = (get_int(key) or 0) + delta
    if value == 0:
        delete(key)
    else:
        put_int(key, value)
    return value


def get_float(key: Bytes) -> Optional[float]:
    """The number under `key` (stored as text); None when absent or not one."""
    text = get_str(key)
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def put_float(key: Bytes, value: float) -> None:
    """Sets `key` to `value`, as text that reads back to the same number."""
    put_str(key, repr(float(value)))


def get_json(key: Bytes) -> Any:
    """The JSON value under `key`, parsed; None when absent."""
    text = get_str(key)
    return None if text is None else json.loads(text)


def put_json(key: Bytes, value: Any) -> None:
    """Sets `key` to `value` as compact JSON."""
    put_str(key, json.dumps(value, separators=(",", ":")))


def clear() -> None:
    """Empties the state outside a module, between unit tests."""
    _native.clear()
