"""account-pipeline in Python: open deals per account, kept in the pipeline's state and
emitted whenever a count changes. Makes the same records and keeps the same state,
byte for byte, as the Rust `account-pipeline`, so either can take over from the other.

State: `deal/<documentId>` holds the group of each open deal, `open/<group>` the count
per group. A record keyed by the group carries `{"account": ..., "open_deals": n}`, or
is a tombstone when the group has no open deal left.

Parameters: `group_by`, the column deals are counted by (default
`fullDocument.account_id`); `open_status`, the `fullDocument.status` of an open deal
(default `open`).
"""

import sluice_transform as sluice
from sluice_transform import ChangeType, Record, RowError, state


def json_string(text):
    """`text` as a JSON string, escaped as the Rust example escapes it."""
    escaped = []
    for c in text:
        if c == '"':
            escaped.append('\\"')
        elif c == "\\":
            escaped.append("\\\\")
        elif ord(c) < 0x20:
            escaped.append(f"\\u{ord(c):04x}")
        else:
            escaped.append(c)
    return '"' + "".join(escaped) + '"'


class AccountPipeline(sluice.Transform):
    def init(self, params):
        self.group_by = params.get("group_by", "fullDocument.account_id")
        self.open_status = params.get("open_status", "open")

    def transform(self, batch, out):
        # Groups whose count changed, with the last row that changed each, in the
        # order they were first changed (dicts keep insertion order).
        changed = {}
        for row in batch.rows():
            deal = row["documentId"]
            if deal is None:
                raise RowError(row, "The row has no documentId.")
            if row.change_type == ChangeType.UPDATE_PREIMAGE:
                continue
            if row.change_type == ChangeType.DELETE:
                now_open = None
            elif row["fullDocument.status"] == self.open_status:
                now_open = row[self.group_by] or ""
            else:
                now_open = None
            key = f"deal/{deal}"
            was_open = state.get_str(key)
            if was_open == now_open:
                continue
            if was_open is not None:
                state.add(f"open/{was_open}", -1)
                changed[was_open] = row.index
            if now_open is None:
                state.delete(key)
            else:
                state.put_str(key, now_open)
                state.add(f"open/{now_open}", 1)
                changed[now_open] = row.index
        for group, row in changed.items():
            count = state.get_int(f"open/{group}") or 0
            value = f'{{"account":{json_string(group)},"open_deals":{count}}}' if count else None
            out.emit(row, Record(key=group, value=value))


Transformer = sluice.export(AccountPipeline)
