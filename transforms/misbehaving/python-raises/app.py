"""Test fixture: a Python transform whose code raises on every batch. The host must
report the trap with Python's traceback, which CPython writes to stderr."""

from wit_world import exports


class Transformer(exports.Transformer):
    def init(self, params):
        pass

    def transform(self, batch):
        raise ValueError(f"cannot handle a batch of {batch.num_rows()} deals")
