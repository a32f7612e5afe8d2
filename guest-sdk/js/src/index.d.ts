// Types for the JavaScript SDK for Sluice transforms (`@sluice/transform`).

/** What happened to a row, as Delta's `_change_type` column spells it. */
export type ChangeType = 'insert' | 'update_preimage' | 'update_postimage' | 'delete';

export declare const ChangeType: {
  readonly Insert: 'insert';
  readonly UpdatePreimage: 'update_preimage';
  readonly UpdatePostimage: 'update_postimage';
  readonly Delete: 'delete';
  /** The change type called `name` (surrounding blanks ignored); throws if unknown. */
  parse(name: string): ChangeType;
};

/** A column value: numbers (Delta byte/short/int/float/double), bigints (`long`),
 * strings (string, decimal, and other types rendered as text), booleans,
 * Uint8Arrays (binary), Dates (date, timestamp; millisecond precision), or null. */
export type Value = number | bigint | string | boolean | Uint8Array | Date | null;

/** Bytes for a key, value or header: strings are sent as UTF-8. */
export type Bytes = string | Uint8Array;

/** A record to emit. No `value` makes a tombstone; no `topic` or `partition` takes the
 * pipeline's topic and Kafka's partitioner. */
export interface OutputRecord {
  key?: Bytes | null;
  value?: Bytes | null;
  topic?: string;
  partition?: number;
  headers?: Record<string, Bytes> | Array<[string, Bytes]>;
}

/** Throw from `transform` when one row cannot be transformed. */
export declare class RowError extends Error {
  constructor(row: number | Row, message: string);
  readonly row: number;
}

/** Throw from `transform` when the batch cannot be transformed (any other error is
 * reported the same way, with its name and message). */
export declare class BatchError extends Error {
  constructor(message: string);
}

/** The pipeline's `[transform.params]`, all strings. */
export declare class Params {
  constructor(pairs?: Iterable<[string, string]>);
  /** The parameter's value, or `fallback` when it is not set. */
  get(name: string): string | undefined;
  get(name: string, fallback: string): string;
  /** The parameter's value; throws naming it when it is missing. */
  require(name: string): string;
  /** Every parameter. */
  entries(): IterableIterator<[string, string]>;
}

/** Where a value the host encodes comes from. */
export type Field =
  | { tag: 'column'; val: string }
  | { tag: 'substring'; val: { column: string; pos: number; len: number } }
  | { tag: 'constant'; val: unknown }
  | { tag: 'change-type' }
  | { tag: 'commit-version' }
  | { tag: 'commit-timestamp' };

/** A column's value, typed as in the table (dotted path for struct fields). */
export declare function column(name: string): Field;
/** Spark's `substring(name, pos, len)`: `len` characters from 1-based position `pos`. */
export declare function substring(name: string, pos: number, len: number): Field;
/** A constant: null, a boolean, a number, a bigint or a string. */
export declare function constant(value: null | boolean | number | bigint | string): Field;
/** The row's `_change_type`, as Delta spells it. */
export declare const CHANGE_TYPE: Field;
/** The row's `_commit_version`. */
export declare const COMMIT_VERSION: Field;
/** The row's `_commit_timestamp`, as ISO-8601 text. */
export declare const COMMIT_TIMESTAMP: Field;

/** How `encode` makes record values. */
export type ValueEncoding =
  | { tag: 'json'; val: Array<{ name: string; value: Field }> }
  | { tag: 'json-row' }
  | { tag: 'tombstone' };

/** Record values as a JSON object of these fields, in order; nulls are left out. */
export declare function json(fields: Record<string, Field> | Array<[string, Field]>): ValueEncoding;
/** Record values as a JSON object of every data column, nested structs kept. */
export declare const JSON_ROW: ValueEncoding;
/** No record values: tombstones. */
export declare const TOMBSTONE: ValueEncoding;

/** A comparison for `selectWhere`. */
export type Comparison = '==' | '!=' | '<' | '<=' | '>' | '>=' | 'is null' | 'is not null';

/** One change row. */
export declare class Row {
  /** Index of the row within its batch. */
  readonly index: number;
  /** What happened to the row. */
  readonly changeType: ChangeType;
  /** The Delta version that made the change. */
  readonly commitVersion: bigint;
  /** When the change was committed: microseconds since the epoch (UTC). */
  readonly commitTimestamp: bigint;
  /** A column's value (dotted path for struct fields); throws if there is no such column. */
  get(name: string): Value;
  /** Every data column (struct fields under dotted names), nulls left out. */
  toObject(): Record<string, Value>;
}

/** One batch of change rows, in commit order. */
export declare class Batch {
  /** Number of rows. */
  readonly length: number;
  /** Every row, in order. */
  rows(): IterableIterator<Row>;
  /** The row at `index`. */
  row(index: number): Row;
  /** A data column's values, one per row; throws if there is no such column. */
  column(name: string): Value[];
  /** Every data column, by name. */
  allColumns(): Map<string, Value[]>;
  /** `_change_type` of each row. */
  changeTypes(): ChangeType[];
  /** `_commit_version` of each row. */
  commitVersions(): BigInt64Array;
  /** `_commit_timestamp` of each row, microseconds since the epoch. */
  commitTimestamps(): BigInt64Array;
  /** Indexes of the rows (of `within`, or of the batch) with one of these change
   * types, in order. The host does the work. */
  selectChangeTypes(types: ChangeType[], within?: ArrayLike<number>): Uint32Array;
  /** Indexes of the rows (of `within`, or of the batch) where `column op value`
   * holds. The host does the work. */
  selectWhere(
    column: string,
    op: Comparison,
    value?: null | boolean | number | bigint | string,
    within?: ArrayLike<number>,
  ): Uint32Array;
}

/** What `Output.encode` makes: one record per row in `rows`, in row order. */
export interface EncodeSpec {
  rows: ArrayLike<number>;
  /** The key, rendered as text; no key when absent. */
  key?: Field;
  value: ValueEncoding;
  /** Whether delete rows become tombstones, keeping row order. */
  deleteAsTombstone?: boolean;
  topic?: string;
  /** Headers: name and where the value comes from (rendered as text). */
  headers?: Record<string, Field> | Array<[string, Field]>;
}

/** A schema the module encodes its own values or keys with (contract 1.1). */
export interface OwnSchema {
  readonly kind: 'avro' | 'json-schema' | 'protobuf';
  readonly text: string;
  /** Protobuf: the message's full name; Avro and JSON Schema: the record name for
   * record-name subjects when the schema names none. */
  readonly name?: string;
}

/** An Avro schema (its JSON text). */
export declare function avroSchema(text: string, name?: string): OwnSchema;
/** A JSON Schema; the bytes framed with it are JSON text. */
export declare function jsonSchema(text: string, name?: string): OwnSchema;
/** A `.proto` file and the message (full name) the bytes are, the first when absent. */
export declare function protobufSchema(text: string, message?: string): OwnSchema;

/** What `Output.emitFramed` frames: keys, values or both. */
export interface Framing {
  key?: OwnSchema;
  value?: OwnSchema;
}

/** Where a transform puts its records, in order. */
export declare class Output {
  /** Emits a record made from `row` (a Row or its index). */
  emit(row: Row | number, record: OutputRecord): void;
  /** Emits a record whose value or key the module encoded with its own schema; the
   * host registers the schema and frames the bytes with its id. */
  emitFramed(row: Row | number, framing: Framing, record: OutputRecord): void;
  /** Marks a row as failed, with why; the transform carries on with the others. */
  reject(row: Row | number, message: string): void;
  /** Has the host make the records natively; returns how many. */
  encode(spec: EncodeSpec): number;
  /** Sends the records emitted so far to the host (done for you). */
  flush(): void;
}

/** A transform: `init` runs once per instance, `transform` once per batch. */
export interface Transform {
  init?(params: Params): void;
  transform(batch: Batch, out: Output): void;
}

/** Logs to the pipeline's log, attributed to the module. */
export declare const log: {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
};

/** The component's export: `export const transformer = exportTransform(MyTransform);`. */
export declare function exportTransform(transform: new () => Transform): unknown;

/** An entry of the pipeline's keyed state. */
export interface StateEntry {
  key: Uint8Array;
  value: Uint8Array;
}

/** The pipeline's keyed state (contract 1.2; the pipeline needs a `[state]` section):
 * values by key, kept across batches and committed exactly once with the batch's
 * records. Keys and values are bytes (a string is taken as UTF-8); text, numbers and
 * JSON are stored as UTF-8 text, as every SDK stores them. In Node it is a map in
 * memory that `clear()` empties. */
export declare const state: {
  get(key: Bytes): Uint8Array | null;
  getMany(keys: Bytes[]): Array<Uint8Array | null>;
  put(key: Bytes, value: Bytes): void;
  delete(key: Bytes): void;
  /** Up to `limit` (default 256) entries whose keys start with `prefix`, in byte
   * order of their keys, after `after`. */
  scan(prefix?: Bytes, options?: { after?: Bytes | null; limit?: number }): StateEntry[];
  /** Every entry whose key starts with `prefix`. */
  entries(prefix?: Bytes): Iterable<StateEntry>;
  getStr(key: Bytes): string | null;
  putStr(key: Bytes, value: string): void;
  getNumber(key: Bytes): number | null;
  putNumber(key: Bytes, value: number): void;
  /** Adds `delta` to the counter under `key` and returns the new value; a counter
   * that reaches 0 is removed. */
  add(key: Bytes, delta: number): number;
  getJson(key: Bytes): unknown;
  putJson(key: Bytes, value: unknown): void;
  /** In Node only: empties the state. */
  clear?(): void;
};
