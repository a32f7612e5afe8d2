"""{{name}}: a Sluice transform.

Emits inserts and update post-images as JSON objects of the row, deletes as
tombstones, keyed by the column the `key` parameter names (keyless when it is not
set), with the change type in a `change_type` header. Update pre-images are dropped.
"""

import sluice_transform as sluice
from sluice_transform import CHANGE_TYPE, JSON_ROW, ChangeType, column


class Changes(sluice.Transform):
    def init(self, params):
        self.key = params.get("key")

    def transform(self, batch, out):
        rows = batch.select_change_types(
            ChangeType.INSERT, ChangeType.UPDATE_POSTIMAGE, ChangeType.DELETE
        )
        out.encode(
            rows,
            key=column(self.key) if self.key else None,
            value=JSON_ROW,
            delete_as_tombstone=True,
            headers={"change_type": CHANGE_TYPE},
        )


# The build looks for `Transformer`.
Transformer = sluice.export(Changes)
