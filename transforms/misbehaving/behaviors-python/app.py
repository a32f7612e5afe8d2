"""A Python module that breaks the host's limits on purpose, through the SDK, for the
limit tests. Parameter `behavior`: `loop` (never returns) or `hog` (grows memory
without end); anything else emits each row keyed by `documentId`, its change type as
value."""

import sluice_transform as sluice
from sluice_transform import Record


class Behaviors(sluice.Transform):
    def init(self, params):
        self.behavior = params.get("behavior", "")

    def transform(self, batch, out):
        if self.behavior == "loop":
            n = 0
            while True:
                n += 1
        if self.behavior == "hog":
            hog = []
            while True:
                hog.append(bytearray(1 << 20))
        for row in batch.rows():
            out.emit(row, Record(key=row["documentId"], value=row.change_type.value))


Transformer = sluice.export(Behaviors)
