// The SDK inside the module: batches, rows and output over the host's bindings, and
// the `transformer` export. `sluice:transform/host` exists only inside a component,
// so this file is bundled by `sluice build`, never run in Node.

import { log as hostLog } from 'sluice:transform/host@1.0.0';
import { BatchError, COMPARISONS, Params, RowError, scalar } from './model.js';
import { Packer } from './packing.js';

const TO_WIT = {
  insert: 'insert',
  update_preimage: 'update-preimage',
  update_postimage: 'update-postimage',
  delete: 'delete',
};
const FROM_WIT = Object.fromEntries(Object.entries(TO_WIT).map(([ours, wit]) => [wit, ours]));
const MICROS_PER_MILLI = 1000n;

/** Microseconds as milliseconds, rounded down (also before 1970). */
function millis(micros) {
  const quotient = micros / MICROS_PER_MILLI;
  return Number(micros < 0n && quotient * MICROS_PER_MILLI !== micros ? quotient - 1n : quotient);
}
const MILLIS_PER_DAY = 86_400_000;

/** A typed column's values as JavaScript values. */
function jsValues({ tag, val }) {
  switch (tag) {
    case 'date':
      return val.map((days) => (days == null ? null : new Date(days * MILLIS_PER_DAY)));
    case 'timestamp':
    case 'timestamp-ntz':
      return val.map((micros) => (micros == null ? null : new Date(millis(micros))));
    default:
      return Array.from(val, (v) => (v === undefined ? null : v));
  }
}

/** Calls a host function that can fail, turning its error into a BatchError. */
function hostCall(call) {
  try {
    return call();
  } catch (error) {
    throw new BatchError(String(error?.payload ?? error));
  }
}

const index = (row) => (typeof row === 'number' ? row : row.index);

/** One change row: its index in the batch, change columns and values. */
export class Row {
  constructor(batch, index) {
    this.batch = batch;
    this.index = index;
  }

  /** What happened to the row: a `ChangeType` value. */
  get changeType() {
    return this.batch.changeTypes()[this.index];
  }

  /** The Delta version that made the change. */
  get commitVersion() {
    return this.batch.commitVersions()[this.index];
  }

  /** When the change was committed, in microseconds since the epoch (UTC). */
  get commitTimestamp() {
    return this.batch.commitTimestamps()[this.index];
  }

  /** A column's value (null when null): numbers, bigints (Delta `long`), strings,
   * booleans, Uint8Arrays, Dates (dates and timestamps, millisecond precision). */
  get(name) {
    return this.batch.column(name)[this.index];
  }

  /** Every data column (struct fields under dotted names), nulls left out. */
  toObject() {
    const out = {};
    for (const [name, values] of this.batch.allColumns()) {
      const value = values[this.index];
      if (value !== null) out[name] = value;
    }
    return out;
  }
}

/** One batch of change rows, in commit order. Columns are fetched from the host the
 * first time they are read. */
export class Batch {
  constructor(handle) {
    this.handle = handle;
    this.length = handle.numRows();
    this.columns = new Map();
    this.all = false;
  }

  /** Every row, in order. */
  *rows() {
    for (let i = 0; i < this.length; i++) yield new Row(this, i);
  }

  /** The row at `i`. */
  row(i) {
    if (!(i >= 0 && i < this.length)) throw new RangeError(`The batch has ${this.length} rows, not row ${i}.`);
    return new Row(this, i);
  }

  /** A data column's values, one per row (dotted path for struct fields). */
  column(name) {
    if (!this.columns.has(name)) {
      if (this.all) throw new BatchError(`The table has no column \`${name}\`.`);
      for (const col of hostCall(() => this.handle.columns([name]))) {
        this.columns.set(col.name, jsValues(col.values));
      }
    }
    return this.columns.get(name);
  }

  /** Every data column, by name. */
  allColumns() {
    if (!this.all) {
      for (const col of hostCall(() => this.handle.columns([]))) {
        if (!this.columns.has(col.name)) this.columns.set(col.name, jsValues(col.values));
      }
      this.all = true;
    }
    return this.columns;
  }

  /** `_change_type` of each row. */
  changeTypes() {
    this.types ??= this.handle.changeTypes().map((c) => FROM_WIT[c]);
    return this.types;
  }

  /** `_commit_version` of each row, as bigints. */
  commitVersions() {
    this.versions ??= this.handle.commitVersions();
    return this.versions;
  }

  /** `_commit_timestamp` of each row, microseconds since the epoch as bigints. */
  commitTimestamps() {
    this.timestamps ??= this.handle.commitTimestamps();
    return this.timestamps;
  }

  /** Indexes of the rows (of `within`, or of the batch) with one of these change
   * types, in order. The host does the work. */
  selectChangeTypes(types, within = undefined) {
    return this.handle.selectChangeTypes(types.map((c) => TO_WIT[c]), within && Uint32Array.from(within));
  }

  /** Indexes of the rows (of `within`, or of the batch) where `column op value`
   * holds; `op` is `==`, `!=`, `<`, `<=`, `>`, `>=`, `is null` or `is not null`. */
  selectWhere(column, op, value = null, within = undefined) {
    const comparison = COMPARISONS[op];
    if (!comparison) {
      throw new TypeError(`Unknown comparison \`${op}\`; use one of ${Object.keys(COMPARISONS).join(', ')}.`);
    }
    const predicate = { column, op: comparison, value: scalar(value) };
    return hostCall(() => this.handle.selectWhere(predicate, within && Uint32Array.from(within)));
  }
}

/** Where a transform puts its records, in order. */
export class Output {
  constructor(handle) {
    this.handle = handle;
    this.packer = new Packer();
  }

  /** Emits a record made from `row` (a Row or its index): `{ key, value, topic,
   * partition, headers }`, strings or Uint8Arrays; no `value` makes a tombstone. */
  emit(row, record) {
    this.packer.add(index(row), record);
  }

  /** Marks a row as failed, with why; the transform carries on with the others. */
  reject(row, message) {
    this.flush();
    this.handle.reject(index(row), message);
  }

  /** Has the host make one record per row in `rows`, natively: `key` a field
   * (rendered as text), `value` a `json({...})`, `JSON_ROW` or `TOMBSTONE`, deletes as
   * tombstones when `deleteAsTombstone`, `headers` `{ name: field }`. Returns how many
   * records it made. No value passes through JavaScript, so this is the fast way. */
  encode({ rows, key = undefined, value, deleteAsTombstone = false, topic = undefined, headers = {} }) {
    const spec = {
      rows: Uint32Array.from(rows),
      key,
      value,
      deleteAsTombstone,
      topic,
      headers: Array.isArray(headers) ? headers : Object.entries(headers),
    };
    this.flush();
    return hostCall(() => this.handle.emitEncoded(spec));
  }

  /** Sends the records emitted so far to the host (done for you). */
  flush() {
    if (this.packer.length) {
      this.handle.emitPacked(this.packer.packed());
      this.packer.clear();
    }
  }
}

/** Logs to the pipeline's log, attributed to the module (rate-limited by the host). */
export const log = Object.freeze({
  debug: (message) => hostLog('debug', String(message)),
  info: (message) => hostLog('info', String(message)),
  warn: (message) => hostLog('warn', String(message)),
  error: (message) => hostLog('error', String(message)),
});

/** Makes `TransformClass` the module's transformer: `export const transformer =
 * exportTransform(MyTransform);` (the export must be called `transformer`). One
 * instance is made per module instance; `init(params)` sees the pipeline's parameters
 * and `transform(batch, out)` is called once per batch. */
export function exportTransform(TransformClass) {
  let transform;
  return {
    init(params) {
      try {
        transform = new TransformClass();
        transform.init?.(new Params(params));
      } catch (error) {
        throw error instanceof Error ? error.message : String(error);
      }
    },
    transform(handle) {
      const out = new Output(handle);
      try {
        transform.transform(new Batch(handle), out);
        out.flush();
      } catch (error) {
        if (error instanceof RowError) throw { tag: 'row', val: { row: error.row, message: error.message } };
        if (error instanceof BatchError) throw { tag: 'batch', val: error.message };
        throw { tag: 'batch', val: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
      }
    },
  };
}
