// Packs records into the contract's flat form: one byte buffer and a few lists, so a
// batch's records cross into the host in one call instead of one allocation per field.

import { isTypedArray } from './model.js';

const encoder = new TextEncoder();

/** UTF-8 for strings, the bytes themselves for byte arrays. */
export function asBytes(value) {
  if (typeof value === 'string') return encoder.encode(value);
  if (isTypedArray(value, 'Uint8Array')) return value;
  throw new TypeError(`A key, value or header must be a string or a Uint8Array, not ${typeof value}.`);
}

/** Collects records in emit order and hands them out as packed lists. */
export class Packer {
  constructor() {
    this.clear();
  }

  /** Forgets every record. */
  clear() {
    this.chunks = [];
    this.size = 0;
    this.sourceRows = [];
    this.keyLengths = [];
    this.valueLengths = [];
    this.topics = new Map();
    this.topicIndexes = [];
    this.partitions = [];
    this.headerNames = new Map();
    this.headerCounts = [];
    this.headerNameIndexes = [];
    this.headerValueLengths = [];
    this.anyTopic = this.anyPartition = this.anyHeader = false;
  }

  get length() {
    return this.sourceRows.length;
  }

  #push(bytes) {
    this.chunks.push(bytes);
    this.size += bytes.length;
    return bytes.length;
  }

  /** Appends one record made from batch row `row`. Every part is converted before
   * anything is appended, so a bad record leaves the lists as they were. */
  add(row, record) {
    const { topic, partition, headers } = record;
    const key = record.key == null ? null : asBytes(record.key);
    const value = record.value == null ? null : asBytes(record.value);
    const pairs = (headers == null ? [] : Array.isArray(headers) ? headers : Object.entries(headers)).map(
      ([name, headerValue]) => [name, asBytes(headerValue)],
    );
    this.keyLengths.push(key === null ? -1 : this.#push(key));
    this.valueLengths.push(value === null ? -1 : this.#push(value));
    this.sourceRows.push(row);
    if (topic == null) {
      this.topicIndexes.push(0);
    } else {
      this.anyTopic = true;
      if (!this.topics.has(topic)) this.topics.set(topic, this.topics.size);
      this.topicIndexes.push(this.topics.get(topic) + 1);
    }
    if (partition == null) {
      this.partitions.push(-1);
    } else {
      this.anyPartition = true;
      this.partitions.push(partition);
    }
    this.headerCounts.push(pairs.length);
    for (const [name, headerValue] of pairs) {
      this.anyHeader = true;
      if (!this.headerNames.has(name)) this.headerNames.set(name, this.headerNames.size);
      this.headerNameIndexes.push(this.headerNames.get(name));
      this.headerValueLengths.push(this.#push(headerValue));
    }
  }

  /** The contract's `packed-records`; optional lists empty when every record takes
   * the default. */
  packed() {
    const data = new Uint8Array(this.size);
    let offset = 0;
    for (const chunk of this.chunks) {
      data.set(chunk, offset);
      offset += chunk.length;
    }
    return {
      data,
      sourceRows: new Uint32Array(this.sourceRows),
      keyLengths: new Int32Array(this.keyLengths),
      valueLengths: new Int32Array(this.valueLengths),
      topics: [...this.topics.keys()],
      topicIndexes: new Uint32Array(this.anyTopic ? this.topicIndexes : []),
      partitions: new Int32Array(this.anyPartition ? this.partitions : []),
      headerNames: [...this.headerNames.keys()],
      headerCounts: new Uint32Array(this.anyHeader ? this.headerCounts : []),
      headerNameIndexes: new Uint32Array(this.headerNameIndexes),
      headerValueLengths: new Uint32Array(this.headerValueLengths),
    };
  }
}
