// The pipeline's keyed state (contract 1.2) over a backend: the host's `state`
// interface inside a module (guest.js), a map in Node (native.js). Keys and values are
// bytes; text, numbers and JSON are stored as UTF-8 text, as every SDK stores them, so
// `sluice state` shows them and a module in another language reads them.

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** Entries a scan asks for at a time while iterating. */
const PAGE = 256;

/** A key or value as bytes: strings as UTF-8. */
export function bytes(value) {
  if (typeof value === 'string') return encoder.encode(value);
  if (value instanceof Uint8Array) return value;
  throw new TypeError(`state keys and values are strings or Uint8Arrays, not ${typeof value}`);
}

/** UTF-8 bytes as text; null when they are not UTF-8. */
function text(value) {
  if (value == null) return null;
  try {
    return decoder.decode(value);
  } catch {
    return null;
  }
}

/** The state API over `backend` (get, getMany, put, delete, scan on bytes). */
export function keyedState(backend) {
  const state = {
    /** The value under `key`, or null. */
    get: (key) => backend.get(bytes(key)) ?? null,
    /** The values under `keys`, in order, in one host call. */
    getMany: (keys) => backend.getMany(keys.map(bytes)).map((v) => v ?? null),
    /** Sets the value under `key` (a string is stored as UTF-8). */
    put: (key, value) => backend.put(bytes(key), bytes(value)),
    /** Removes `key`; removing an absent key does nothing. */
    delete: (key) => backend.delete(bytes(key)),
    /** Up to `limit` entries ({key, value} as bytes) whose keys start with `prefix`, in
     * byte order of their keys, after `after` when given. */
    scan: (prefix = '', { after = null, limit = PAGE } = {}) =>
      backend.scan(bytes(prefix), after == null ? null : bytes(after), limit),
    /** Every entry whose key starts with `prefix`, a page at a time. */
    *entries(prefix = '') {
      let after = null;
      for (;;) {
        const page = state.scan(prefix, { after, limit: PAGE });
        yield* page;
        if (page.length < PAGE) return;
        after = page[page.length - 1].key;
      }
    },
    /** The text under `key`; null when absent or not UTF-8. */
    getStr: (key) => text(state.get(key)),
    /** Sets `key` to `value`, as UTF-8. */
    putStr: (key, value) => state.put(key, String(value)),
    /** The number under `key` (stored as decimal text); null when absent or not one. */
    getNumber(key) {
      const value = state.getStr(key);
      if (value === null || value.trim() === '') return null;
      const number = Number(value);
      return Number.isNaN(number) ? null : number;
    },
    /** Sets `key` to `value`, as decimal text. */
    putNumber: (key, value) => state.putStr(key, String(value)),
    /** Adds `delta` to the counter under `key` (absent counts as 0) and returns the new
     * value; a counter that reaches 0 is removed. */
    add(key, delta) {
      const value = (state.getNumber(key) ?? 0) + delta;
      if (value === 0) state.delete(key);
      else state.putNumber(key, value);
      return value;
    },
    /** The JSON value under `key`, parsed; null when absent. */
    getJson(key) {
      const value = state.getStr(key);
      return value === null ? null : JSON.parse(value);
    },
    /** Sets `key` to `value` as JSON. */
    putJson: (key, value) => state.putStr(key, JSON.stringify(value)),
  };
  return state;
}

/** Byte strings as map keys that sort as their bytes do (one char per byte). */
function mapKey(key) {
  return String.fromCharCode(...key);
}

function fromMapKey(key) {
  return Uint8Array.from(key, (c) => c.charCodeAt(0));
}

/** The state in memory, for tests in Node: `clear()` empties it. */
export function memoryState() {
  const map = new Map();
  const state = keyedState({
    get: (key) => map.get(mapKey(key)),
    getMany: (keys) => keys.map((key) => map.get(mapKey(key))),
    put: (key, value) => map.set(mapKey(key), Uint8Array.from(value)),
    delete: (key) => map.delete(mapKey(key)),
    scan(prefix, after, limit) {
      const [start, from] = [mapKey(prefix), after == null ? null : mapKey(after)];
      return [...map.keys()]
        .filter((key) => key.startsWith(start) && (from === null || key > from))
        .sort()
        .slice(0, limit)
        .map((key) => ({ key: fromMapKey(key), value: map.get(key) }));
    },
  });
  state.clear = () => map.clear();
  return state;
}
