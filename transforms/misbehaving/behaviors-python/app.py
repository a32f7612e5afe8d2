"""A Python module that breaks the host's limits on purpose, through the SDK, for the
limit tests. Parameter `behavior`: `loop` (never returns), `hog` (grows memory
without end) or `where` (has the host select the rows whose `documentId` is the
parameter `id` and encode them as JSON); anything else emits each row keyed by
`documentId`, its change type as value."""

import sluice_transform as sluice
from sluice_transform import JSON_ROW, Record, column


class Behaviors(sluice.Transform):
    def init(self, params):
        self.behavior = params.get("behavior", "")
        self.id = params.get("id", "")

    def transform(self, batch, out):
        if self.behavior == "loop":
            n = 0
            while True:
                n += 1
        if self.behavior == "hog":
            hog = []
            while True:
                hog.append(bytearray(1 << 20))
        if self.behavior == "where":
            rows = batch.select_where("documentId", "==", self.id)
            out.encode(rows, key=column("documentId"), value=JSON_ROW)
            return
        for row in batch.rows():
            out.emit(row, Record(key=row["documentId"], value=row.change_type.value))


Transformer = sluice.export(Behaviors)
