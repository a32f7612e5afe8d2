// account-pipeline in JavaScript: open deals per account, kept in the pipeline's state
// and emitted whenever a count changes. Makes the same records and keeps the same
// state, byte for byte, as the Rust `account-pipeline`, so either can take over from
// the other.
//
// State: `deal/<documentId>` holds the group of each open deal, `open/<group>` the
// count per group. A record keyed by the group carries `{"account": …, "open_deals":
// n}`, or is a tombstone when the group has no open deal left.
//
// Parameters: `group_by`, the column deals are counted by (default
// `fullDocument.account_id`); `open_status`, the `fullDocument.status` of an open deal
// (default `open`).

import { ChangeType, RowError, exportTransform, state } from '@sluice/transform';

/** `text` as a JSON string, escaped as the Rust example escapes it. */
function jsonString(text) {
  let quoted = '"';
  for (const c of text) {
    if (c === '"') quoted += '\\"';
    else if (c === '\\') quoted += '\\\\';
    else if (c.codePointAt(0) < 0x20) quoted += `\\u${c.codePointAt(0).toString(16).padStart(4, '0')}`;
    else quoted += c;
  }
  return `${quoted}"`;
}

class AccountPipeline {
  init(params) {
    this.groupBy = params.get('group_by', 'fullDocument.account_id');
    this.openStatus = params.get('open_status', 'open');
  }

  transform(batch, out) {
    // Groups whose count changed, with the last row that changed each, in the order
    // they were first changed.
    const changed = new Map();
    for (const row of batch.rows()) {
      const id = row.get('documentId');
      if (id === null) throw new RowError(row.index, 'The row has no documentId.');
      let nowOpen;
      switch (row.changeType) {
        case ChangeType.UpdatePreimage:
          continue;
        case ChangeType.Delete:
          nowOpen = null;
          break;
        default:
          nowOpen = row.get('fullDocument.status') === this.openStatus ? (row.get(this.groupBy) ?? '') : null;
      }
      const key = `deal/${id}`;
      const wasOpen = state.getStr(key);
      if (wasOpen === nowOpen) continue;
      if (wasOpen !== null) {
        state.add(`open/${wasOpen}`, -1);
        changed.set(wasOpen, row.index);
      }
      if (nowOpen === null) {
        state.delete(key);
      } else {
        state.putStr(key, nowOpen);
        state.add(`open/${nowOpen}`, 1);
        changed.set(nowOpen, row.index);
      }
    }
    for (const [group, row] of changed) {
      const count = state.getNumber(`open/${group}`) ?? 0;
      const value = count === 0 ? undefined : `{"account":${jsonString(group)},"open_deals":${count}}`;
      out.emit(row, { key: group, value });
    }
  }
}

export const transformer = exportTransform(AccountPipeline);
