// The SDK inside the module: the host's bindings behind batch.js's host, and the
// `transformer` export. `sluice:transform/host` exists only inside a component, so
// this file is bundled by `sluice build`; Node gets native.js instead.

import { log as hostLog } from 'sluice:transform/host@1.3.0';
import * as hostState from 'sluice:transform/state@1.3.0';
import { Batch, Output } from './batch.js';
import { BatchError, COMPARISONS, Params, RowError, scalar } from './model.js';
import { keyedState } from './state.js';
import { BufferedState } from './state_buffer.js';

const TO_WIT = {
  insert: 'insert',
  update_preimage: 'update-preimage',
  update_postimage: 'update-postimage',
  delete: 'delete',
};
const FROM_WIT = Object.fromEntries(Object.entries(TO_WIT).map(([ours, wit]) => [wit, ours]));
const MICROS_PER_MILLI = 1000n;
const MILLIS_PER_DAY = 86_400_000;

/** Microseconds as milliseconds, rounded down (also before 1970). */
function millis(micros) {
  const quotient = micros / MICROS_PER_MILLI;
  return Number(micros < 0n && quotient * MICROS_PER_MILLI !== micros ? quotient - 1n : quotient);
}

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

/** batch.js's host over the component's batch resource. */
class WitHost {
  constructor(handle) {
    this.handle = handle;
  }

  numRows() {
    return this.handle.numRows();
  }

  columns(names) {
    return hostCall(() => this.handle.columns(names)).map((col) => [col.name, jsValues(col.values)]);
  }

  changeTypes() {
    return this.handle.changeTypes().map((c) => FROM_WIT[c]);
  }

  commitVersions() {
    return this.handle.commitVersions();
  }

  commitTimestamps() {
    return this.handle.commitTimestamps();
  }

  selectChangeTypes(types, within) {
    return this.handle.selectChangeTypes(types.map((c) => TO_WIT[c]), within);
  }

  selectWhere(column, op, value, within) {
    const predicate = { column, op: COMPARISONS[op], value: scalar(value) };
    return hostCall(() => this.handle.selectWhere(predicate, within));
  }

  encode(spec) {
    return hostCall(() => this.handle.emitEncoded(spec));
  }

  emitPacked(packed) {
    this.handle.emitPacked(packed);
  }

  emitFramed(packed, framing) {
    const schema = (s) => s && { kind: s.kind, text: s.text, name: s.name };
    this.handle.emitFramed(packed, { key: schema(framing.key), value: schema(framing.value) });
  }

  reject(row, message) {
    this.handle.reject(row, message);
  }
}

/** Logs to the pipeline's log, attributed to the module (rate-limited by the host). */
export const log = Object.freeze({
  debug: (message) => hostLog('debug', String(message)),
  info: (message) => hostLog('info', String(message)),
  warn: (message) => hostLog('warn', String(message)),
  error: (message) => hostLog('error', String(message)),
});

/** The host's state, with a batch's calls buffered (state_buffer.js). */
const buffered = new BufferedState(hostState);

/** The pipeline's keyed state, through the host: crossing a `[state]` limit, or using
 * state in a pipeline without `[state]`, stops the batch with the host's error. */
export const state = keyedState(buffered);

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
      const host = new WitHost(handle);
      const out = new Output(host);
      buffered.begin();
      try {
        transform.transform(new Batch(host), out);
        out.flush();
        buffered.commit();
      } catch (error) {
        buffered.discard();
        if (error instanceof RowError) throw { tag: 'row', val: { row: error.row, message: error.message } };
        if (error instanceof BatchError) throw { tag: 'batch', val: error.message };
        throw { tag: 'batch', val: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
      }
    },
  };
}
