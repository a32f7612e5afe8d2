// Batches, rows and output over a host: the component's bindings inside a module
// (guest.js) or a batch in memory in unit tests (testing.js). A host has numRows(),
// columns(names) -> [[name, values]], changeTypes(), commitVersions(),
// commitTimestamps(), selectChangeTypes(types, within), selectWhere(column, op, value,
// within), encode(spec), emitPacked(packed), emitFramed(packed, framing) and
// reject(row, message).

import { BatchError, COMPARISONS, rowIndexes, sameFraming } from './model.js';
import { Packer } from './packing.js';

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
  constructor(host) {
    this.host = host;
    this.length = host.numRows();
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
      if (this.all) throw new BatchError(`The batch has no column named \`${name}\`.`);
      for (const [col, values] of this.host.columns([name])) this.columns.set(col, values);
    }
    return this.columns.get(name);
  }

  /** Every data column, by name. */
  allColumns() {
    if (!this.all) {
      for (const [col, values] of this.host.columns([])) {
        if (!this.columns.has(col)) this.columns.set(col, values);
      }
      this.all = true;
    }
    return this.columns;
  }

  /** `_change_type` of each row. */
  changeTypes() {
    this.types ??= this.host.changeTypes();
    return this.types;
  }

  /** `_commit_version` of each row, as bigints. */
  commitVersions() {
    this.versions ??= this.host.commitVersions();
    return this.versions;
  }

  /** `_commit_timestamp` of each row, microseconds since the epoch as bigints. */
  commitTimestamps() {
    this.timestamps ??= this.host.commitTimestamps();
    return this.timestamps;
  }

  /** Indexes of the rows (of `within`, or of the batch) with one of these change
   * types, in order. The host does the work. */
  selectChangeTypes(types, within = undefined) {
    return this.host.selectChangeTypes(types, within && rowIndexes(within));
  }

  /** Indexes of the rows (of `within`, or of the batch) where `column op value`
   * holds; `op` is `==`, `!=`, `<`, `<=`, `>`, `>=`, `is null` or `is not null`. */
  selectWhere(column, op, value = null, within = undefined) {
    if (!COMPARISONS[op]) {
      throw new TypeError(`Unknown comparison \`${op}\`; use one of ${Object.keys(COMPARISONS).join(', ')}.`);
    }
    return this.host.selectWhere(column, op, value, within && rowIndexes(within));
  }
}

/** Where a transform puts its records, in order. */
export class Output {
  constructor(host) {
    this.host = host;
    this.packer = new Packer();
    // The framing of the records in the packer: records cross in runs of one framing.
    this.framing = null;
  }

  /** Emits a record made from `row` (a Row or its index): `{ key, value, topic,
   * partition, headers }`, strings or Uint8Arrays; no `value` makes a tombstone. */
  emit(row, record) {
    if (this.framing) this.flush();
    this.packer.add(index(row), record);
  }

  /** Emits a record whose value (or key) the module encoded itself with its own
   * schema: `framing` is `{ value: avroSchema(...) | jsonSchema(...) |
   * protobufSchema(...), key: ... }`. The host registers the schemas in the
   * pipeline's schema registry, checks the bytes decode with them and writes
   * Confluent's wire format header before them. Make the framing once and reuse it. */
  emitFramed(row, framing, record) {
    if (!sameFraming(this.framing, framing)) {
      this.flush();
      this.framing = framing;
    }
    this.packer.add(index(row), record);
  }

  /** Marks a row as failed, with why; the transform carries on with the others. */
  reject(row, message) {
    this.flush();
    this.host.reject(index(row), message);
  }

  /** Has the host make one record per row in `rows`, natively: `key` a field
   * (rendered as text), `value` a `json({...})`, `JSON_ROW` or `TOMBSTONE`, deletes as
   * tombstones when `deleteAsTombstone`, `headers` `{ name: field }`. Returns how many
   * records it made. No value passes through JavaScript, so this is the fast way. */
  encode({ rows, key = undefined, value, deleteAsTombstone = false, topic = undefined, headers = {} }) {
    const spec = {
      rows: rowIndexes(rows),
      key,
      value,
      deleteAsTombstone,
      topic,
      headers: Array.isArray(headers) ? headers : Object.entries(headers),
    };
    this.flush();
    return this.host.encode(spec);
  }

  /** Sends the records emitted so far to the host (done for you). */
  flush() {
    if (this.packer.length) {
      if (this.framing) this.host.emitFramed(this.packer.packed(), this.framing);
      else this.host.emitPacked(this.packer.packed());
      this.packer.clear();
    }
    this.framing = null;
  }
}
