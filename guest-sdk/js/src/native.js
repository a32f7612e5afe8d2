// The JavaScript SDK outside a module (Node: unit tests with testing.js): the same
// API, with the log on stderr and nothing to export.

export * from './api.js';
import { memoryState } from './state.js';

/** The pipeline's keyed state, in memory: `state.clear()` empties it between tests. */
export const state = memoryState();

/** Writes to stderr, as the pipeline's log would show it. */
export const log = Object.freeze({
  debug: (message) => console.error(`DEBUG ${message}`),
  info: (message) => console.error(`INFO ${message}`),
  warn: (message) => console.error(`WARN ${message}`),
  error: (message) => console.error(`ERROR ${message}`),
});

/** Outside a module there is nothing to export: returns the class, so a transform's
 * file imports cleanly in tests. */
export function exportTransform(TransformClass) {
  return TransformClass;
}
