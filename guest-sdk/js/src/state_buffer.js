// The state backend inside a module: the host's `state` interface, with a batch's
// calls buffered. Each call to the host costs tens of microseconds in componentize-js's
// bindings, so during a batch a key already read or written is answered here, and
// writes are kept here (the last one per key) and sent when the batch's transform
// returns. A scan sends them first, so the host's answer includes them. Outside a batch
// (in `init`) calls go straight to the host, which refuses them.
//
// The writes are also sent once they hold more than FLUSH_BYTES, so a module that
// hoards state meets the host's `[state]` limit (a typed error) before it runs out of
// its own memory.

/** Bytes of keys and values buffered before they are sent in the middle of a batch. */
export const FLUSH_BYTES = 1 << 20;

/** A value the caller may change without changing what the batch knows. */
function copy(value) {
  return value === null ? null : value.slice();
}

/** A key's bytes as a string, to find it in a Map. */
function id(key) {
  let text = '';
  for (let i = 0; i < key.length; i += 4096) {
    text += String.fromCharCode.apply(null, key.subarray(i, i + 4096));
  }
  return text;
}

export class BufferedState {
  constructor(host) {
    this.host = host;
    this.active = false;
    /** What the batch knows of each key it read or wrote: bytes, or null when absent. */
    this.known = new Map();
    /** Keys written and not yet sent (id -> key); their values are in `known`. */
    this.pending = new Map();
    /** Bytes of keys and values in `pending` (rewrites of a key counted again). */
    this.pendingBytes = 0;
  }

  /** Starts buffering for a batch. */
  begin() {
    this.active = true;
  }

  /** Sends the batch's writes to the host and stops buffering. */
  commit() {
    try {
      this.flush();
    } finally {
      this.discard();
    }
  }

  /** Forgets the batch's reads and writes (the host forgets a failed batch's too). */
  discard() {
    this.active = false;
    this.known.clear();
    this.pending.clear();
    this.pendingBytes = 0;
  }

  flush() {
    for (const [k, key] of this.pending) {
      const value = this.known.get(k);
      if (value === null) this.host['delete'](key);
      else this.host.put(key, value);
    }
    this.pending.clear();
    this.pendingBytes = 0;
  }

  /** Keeps a write to send later, sending all of them once they grow past FLUSH_BYTES. */
  buffer(k, key, value) {
    this.known.set(k, value);
    this.pending.set(k, key);
    this.pendingBytes += key.length + (value === null ? 0 : value.length);
    if (this.pendingBytes > FLUSH_BYTES) this.flush();
  }

  get(key) {
    if (!this.active) return this.host.get(key);
    const k = id(key);
    if (!this.known.has(k)) this.known.set(k, this.host.get(key) ?? null);
    return copy(this.known.get(k));
  }

  getMany(keys) {
    if (!this.active) return this.host.getMany(keys);
    const ids = keys.map(id);
    // Each key the batch does not know yet, once: id -> key.
    const missing = new Map();
    ids.forEach((k, i) => {
      if (!this.known.has(k)) missing.set(k, keys[i]);
    });
    if (missing.size > 0) {
      const values = this.host.getMany([...missing.values()]);
      [...missing.keys()].forEach((k, i) => this.known.set(k, values[i] ?? null));
    }
    return ids.map((k) => copy(this.known.get(k)));
  }

  put(key, value) {
    if (!this.active) return this.host.put(key, value);
    // Copies: the caller may reuse its buffers before the write is sent.
    const kept = key.slice();
    this.buffer(id(kept), kept, value.slice());
  }

  delete(key) {
    if (!this.active) return this.host['delete'](key);
    const kept = key.slice();
    this.buffer(id(kept), kept, null);
  }

  scan(prefix, after, limit) {
    if (this.active) this.flush();
    return this.host.scan(prefix, after ?? undefined, limit);
  }
}
