"""gold-deals in Python: CRM deal changes from the bronze table to the gold topic, as
the `deal_gold1` Delta Live Tables query shapes them. Makes the same records, byte for
byte, as the Rust `gold-deals`.

The module only describes the records (`out.encode`); the host selects and encodes
them natively, so no value passes through Python.

Parameter `change_types` (default `insert,update_postimage,delete`): the change types
to emit. Parameter `change_type_header`: when set, every record carries the row's
change type in a header of that name.
"""

import sluice_transform as sluice
from sluice_transform import CHANGE_TYPE, ChangeType, Json, column, substring


def object_id(name):
    """Spark's substring(name, 11, 24): the hex inside ObjectId('...')."""
    return substring(name, 11, 24)


GOLD = Json({
    "documentId": column("documentId"),
    "eventTimestamp": column("eventTimestamp"),
    "owner_id": object_id("fullDocument.owner_id"),
    "owner_type": column("fullDocument.owner_type"),
    "account_id": object_id("fullDocument.account_id"),
    "manager_account_id": object_id("fullDocument.manager_account_id"),
    "hubspot_deal_id": column("fullDocument.hubspot_deal_id"),
    "stage": column("fullDocument.stage"),
    "status": column("fullDocument.status"),
    "title": column("fullDocument.title"),
})


class GoldDeals(sluice.Transform):
    def init(self, params):
        names = params.get("change_types", "insert,update_postimage,delete")
        self.emit = [ChangeType.parse(name) for name in names.split(",")]
        header = params.get("change_type_header")
        self.headers = {header: CHANGE_TYPE} if header else {}

    def transform(self, batch, out):
        out.encode(
            batch.select_change_types(*self.emit),
            key=column("documentId"),
            value=GOLD,
            delete_as_tombstone=True,
            headers=self.headers,
        )


Transformer = sluice.export(GoldDeals)
