// The SDK's plain values: change types, errors, parameters and the fields the host
// encodes. Nothing here touches the host, so it runs (and is tested) in Node.

/** What happened to a row, as Delta's `_change_type` column spells it. */
export const ChangeType = Object.freeze({
  Insert: 'insert',
  UpdatePreimage: 'update_preimage',
  UpdatePostimage: 'update_postimage',
  Delete: 'delete',
  /** The change type called `name` (surrounding blanks ignored). */
  parse(name) {
    const trimmed = String(name).trim();
    if (['insert', 'update_preimage', 'update_postimage', 'delete'].includes(trimmed)) return trimmed;
    throw new Error(
      `Unknown change type \`${trimmed}\`; use insert, update_preimage, update_postimage or delete.`,
    );
  },
});

/** Throw from `transform` when one row cannot be transformed. */
export class RowError extends Error {
  constructor(row, message) {
    super(message);
    this.name = 'RowError';
    this.row = typeof row === 'number' ? row : row.index;
  }
}

/** Throw from `transform` when the batch cannot be transformed (any other error is
 * reported the same way, with its name and message). */
export class BatchError extends Error {
  constructor(message) {
    super(message);
    this.name = 'BatchError';
  }
}

/** The pipeline's `[transform.params]`, all strings. */
export class Params {
  constructor(pairs = []) {
    this.values = new Map(pairs);
  }

  /** The parameter's value, or `fallback` when it is not set. */
  get(name, fallback = undefined) {
    return this.values.has(name) ? this.values.get(name) : fallback;
  }

  /** The parameter's value; an error naming it when it is missing. */
  require(name) {
    if (!this.values.has(name)) {
      throw new Error(`Parameter ${name} is required; set it under [transform.params].`);
    }
    return this.values.get(name);
  }

  /** Every parameter, as `[name, value]` pairs. */
  entries() {
    return this.values.entries();
  }
}

/** A column's value, typed as in the table (dotted path for struct fields). */
export const column = (name) => ({ tag: 'column', val: name });

/** Spark's `substring(name, pos, len)`: `len` characters from 1-based position `pos`. */
export const substring = (name, pos, len) => ({ tag: 'substring', val: { column: name, pos, len } });

/** A constant: null, a boolean, an integer (number or bigint), a float or a string. */
export const constant = (value) => ({ tag: 'constant', val: scalar(value) });

/** The row's `_change_type`, as Delta spells it. */
export const CHANGE_TYPE = Object.freeze({ tag: 'change-type' });
/** The row's `_commit_version`. */
export const COMMIT_VERSION = Object.freeze({ tag: 'commit-version' });
/** The row's `_commit_timestamp`, as ISO-8601 text. */
export const COMMIT_TIMESTAMP = Object.freeze({ tag: 'commit-timestamp' });

/** Record values as a JSON object of these fields, in order (an object or
 * `[name, field]` pairs); null values are left out, as Spark's `to_json` does. */
export const json = (fields) => ({
  tag: 'json',
  val: (Array.isArray(fields) ? fields : Object.entries(fields)).map(([name, value]) => ({ name, value })),
});
/** Record values as a JSON object of every data column, nested structs kept. */
export const JSON_ROW = Object.freeze({ tag: 'json-row' });
/** No record values: tombstones. */
export const TOMBSTONE = Object.freeze({ tag: 'tombstone' });

/** A constant in the contract's form. */
export function scalar(value) {
  if (value === null || value === undefined) return { tag: 'null' };
  switch (typeof value) {
    case 'boolean':
      return { tag: 'boolean', val: value };
    case 'bigint':
      return { tag: 'integer', val: value };
    case 'number':
      return Number.isInteger(value) ? { tag: 'integer', val: BigInt(value) } : { tag: 'float', val: value };
    case 'string':
      return { tag: 'text', val: value };
    default:
      throw new TypeError(`A constant must be null, a boolean, a number, a bigint or a string, not ${typeof value}.`);
  }
}

/** The operators `selectWhere` takes, and the contract's names for them. */
export const COMPARISONS = Object.freeze({
  '==': 'equal',
  '!=': 'not-equal',
  '<': 'less',
  '<=': 'less-or-equal',
  '>': 'greater',
  '>=': 'greater-or-equal',
  'is null': 'is-null',
  'is not null': 'is-not-null',
});

/** Whether `value` is a typed array of kind `name` (`Uint8Array`, `Uint32Array`) from any
 * realm. Inside a module the component's bindings make arrays in a realm of their own,
 * where `instanceof` is false. */
export function isTypedArray(value, name) {
  return ArrayBuffer.isView(value) && Object.prototype.toString.call(value) === `[object ${name}]`;
}

/** Row indexes as a Uint32Array: one the host handed over is passed back as it is (the
 * bindings copy it in one move); anything else is converted element by element. */
export function rowIndexes(rows) {
  return isTypedArray(rows, 'Uint32Array') ? rows : Uint32Array.from(rows);
}


/** A schema the module encodes its own values or keys with, for `out.emitFramed`
 * (contract 1.1): Avro's JSON text. `name` names the record for record-name subjects
 * when the schema names none. */
export const avroSchema = (text, name = undefined) => Object.freeze({ kind: 'avro', text, name });

/** A JSON Schema; the bytes framed with it are JSON text. */
export const jsonSchema = (text, name = undefined) => Object.freeze({ kind: 'json-schema', text, name });

/** A `.proto` file's text; `message` is the full name of the message the bytes are
 * (the file's first when absent). */
export const protobufSchema = (text, message = undefined) =>
  Object.freeze({ kind: 'protobuf', text, name: message });

/** Whether two framings (`{ key, value }` of schemas) frame records the same way. */
export function sameFraming(a, b) {
  if (a === b) return true;
  if (!a || !b) return false;
  const same = (x, y) => x === y || (!!x && !!y && x.kind === y.kind && x.text === y.text && x.name === y.name);
  return same(a.key, b.key) && same(a.value, b.value);
}
