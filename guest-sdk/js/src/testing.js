// Unit tests for transforms, in Node: a batch of rows in memory, the transform's
// `init` and `transform` called as the host calls them, and the records it emitted.
//
//   import { ChangeType } from '@sluice/transform';
//   import { TestBatch, run } from '@sluice/transform/testing';
//   const batch = new TestBatch({ documentId: ['d1'] }, { changeTypes: [ChangeType.Insert] });
//   const { records } = run(WonDeals, batch, { stage: 'closedwon' });
//
// Row access and selectChangeTypes/selectWhere work as in the host; out.encode is the
// host's native encoder and only runs there: test such transforms with
// `sluice preview` on a small table.

import { Batch, Output } from './batch.js';
import { BatchError, ChangeType, Params } from './model.js';

const HOLDS = {
  '==': (order) => order === 0,
  '!=': (order) => order !== 0,
  '<': (order) => order < 0,
  '<=': (order) => order <= 0,
  '>': (order) => order > 0,
  '>=': (order) => order >= 0,
};

const encoder = new TextEncoder();

/** A value's type as the host's messages name it. */
function kind(value) {
  switch (typeof value) {
    case 'boolean':
    case 'string':
      return typeof value;
    case 'bigint':
      return 'integer';
    case 'number':
      return Number.isInteger(value) ? 'integer' : 'floating point';
    default:
      return ArrayBuffer.isView(value) ? 'binary' : 'nested';
  }
}

/** Orders a column value against a constant as the host does: numbers with numbers
 * (bigints too), text by its UTF-8 bytes, booleans with booleans. Null when either is
 * NaN, which compares as nothing; undefined when the types do not compare. */
function order(value, constant) {
  const numeric = (v) => typeof v === 'number' || typeof v === 'bigint';
  if (numeric(value) && numeric(constant)) {
    if (Number.isNaN(value) || Number.isNaN(constant)) return null;
    return value < constant ? -1 : value > constant ? 1 : 0;
  }
  if (typeof value === 'string' && typeof constant === 'string') {
    const [a, b] = [encoder.encode(value), encoder.encode(constant)];
    for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
    return a.length - b.length;
  }
  if (typeof value === 'boolean' && typeof constant === 'boolean') return Number(value) - Number(constant);
  return undefined;
}

/** A batch held in memory: columns by name (struct fields by dotted path), one value
 * per row, and each row's change type (inserts by default), commit version (1n) and
 * commit time in microseconds (0n). */
export class TestBatch {
  constructor(columns, { changeTypes, commitVersions, commitTimestamps } = {}) {
    const entries = columns instanceof Map ? [...columns] : Object.entries(columns);
    const lengths = new Set(entries.map(([, values]) => values.length));
    if (lengths.size > 1) throw new RangeError(`Every column needs the same number of rows, not ${[...lengths]}.`);
    this.rows = lengths.size ? [...lengths][0] : (changeTypes ?? []).length;
    this.columns = new Map(entries.map(([name, values]) => [name, values.map((v) => (v === undefined ? null : v))]));
    this.changeTypes = changeTypes ?? Array(this.rows).fill(ChangeType.Insert);
    this.commitVersions = BigInt64Array.from(commitVersions ?? Array(this.rows).fill(1n), BigInt);
    this.commitTimestamps = BigInt64Array.from(commitTimestamps ?? Array(this.rows).fill(0n), BigInt);
    for (const [name, values] of [
      ['changeTypes', this.changeTypes],
      ['commitVersions', this.commitVersions],
      ['commitTimestamps', this.commitTimestamps],
    ]) {
      if (values.length !== this.rows) throw new RangeError(`${name} has ${values.length} entries for ${this.rows} rows.`);
    }
  }
}

const decoder = new TextDecoder();

/** Records back from the packed form: keys, values and header values as strings. */
function unpack(packed) {
  const { data, topics, headerNames } = packed;
  const text = (start, length) => decoder.decode(data.subarray(start, start + length));
  const records = [];
  let at = 0;
  let header = 0;
  for (let i = 0; i < packed.sourceRows.length; i++) {
    const [keyLength, valueLength] = [packed.keyLengths[i], packed.valueLengths[i]];
    const record = {};
    if (keyLength >= 0) record.key = text(at, keyLength);
    at += Math.max(keyLength, 0);
    if (valueLength >= 0) record.value = text(at, valueLength);
    at += Math.max(valueLength, 0);
    const topicIndex = packed.topicIndexes.length ? packed.topicIndexes[i] : 0;
    if (topicIndex) record.topic = topics[topicIndex - 1];
    if (packed.partitions.length && packed.partitions[i] >= 0) record.partition = packed.partitions[i];
    record.headers = [];
    for (let h = 0; h < (packed.headerCounts.length ? packed.headerCounts[i] : 0); h++, header++) {
      const length = packed.headerValueLengths[header];
      record.headers.push([headerNames[packed.headerNameIndexes[header]], text(at, length)]);
      at += length;
    }
    records.push(record);
  }
  return records;
}

/** batch.js's host over a TestBatch, collecting what the transform emits. */
class MemoryHost {
  constructor(batch, result) {
    this.batch = batch;
    this.result = result;
  }

  numRows() {
    return this.batch.rows;
  }

  columns(names) {
    for (const name of names) {
      if (!this.batch.columns.has(name)) throw new BatchError(`The batch has no column named \`${name}\`.`);
    }
    return (names.length ? names : [...this.batch.columns.keys()]).map((name) => [name, this.batch.columns.get(name)]);
  }

  changeTypes() {
    return this.batch.changeTypes;
  }

  commitVersions() {
    return this.batch.commitVersions;
  }

  commitTimestamps() {
    return this.batch.commitTimestamps;
  }

  #rows(within) {
    if (!within) return [...Array(this.batch.rows).keys()];
    const bad = [...within].find((row) => row >= this.batch.rows);
    if (bad !== undefined) throw new BatchError(`Row ${bad} is out of range: the batch has ${this.batch.rows} rows.`);
    return [...within];
  }

  selectChangeTypes(types, within) {
    return Uint32Array.from(this.#rows(within).filter((i) => types.includes(this.batch.changeTypes[i])));
  }

  selectWhere(column, op, value, within) {
    const values = this.columns([column])[0][1];
    const rows = this.#rows(within);
    if (op === 'is null') return Uint32Array.from(rows.filter((i) => values[i] === null));
    if (op === 'is not null') return Uint32Array.from(rows.filter((i) => values[i] !== null));
    const keep = (i) => {
      if (values[i] === null || value === null || value === undefined) return false;
      const ordering = order(values[i], value);
      if (ordering === undefined) {
        throw new BatchError(`Cannot compare column \`${column}\` (${kind(values[i])}) with ${typeof value === 'bigint' ? `${value}n` : JSON.stringify(value)}.`);
      }
      return ordering !== null && HOLDS[op](ordering);
    };
    return Uint32Array.from(rows.filter(keep));
  }

  encode() {
    throw new Error(
      'out.encode runs in the host\'s native encoder, not in unit tests: test this transform with `sluice preview` on a small table.',
    );
  }

  emitPacked(packed) {
    this.result.records.push(...unpack(packed));
    this.result.rows.push(...packed.sourceRows);
  }

  // The host frames them; in tests the records keep the module's bytes.
  emitFramed(packed) {
    this.emitPacked(packed);
  }

  reject(row, message) {
    // As on the host: one rejection per row, the first reason kept.
    if (!this.result.rejected.some(([rejected]) => rejected === row)) {
      this.result.rejected.push([row, message]);
    }
  }
}

/** Makes the transform, calls `init(params)` and `transform` on `batch` as the host
 * does, and returns `{ records, rows, rejected }`: records as `{ key, value, topic,
 * partition, headers }` with strings, the row each came from, and `[row, message]`
 * for rejected rows. An error the transform throws is thrown here. */
export function run(TransformClass, batch, params = {}) {
  const transform = new TransformClass();
  transform.init?.(new Params(Object.entries(params)));
  const result = { records: [], rows: [], rejected: [] };
  const host = new MemoryHost(batch, result);
  const out = new Output(host);
  transform.transform(new Batch(host), out);
  out.flush();
  return result;
}
