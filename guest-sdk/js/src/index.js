// The JavaScript SDK for Sluice transforms: see README.md and index.d.ts.

export {
  ChangeType,
  RowError,
  BatchError,
  Params,
  column,
  substring,
  constant,
  CHANGE_TYPE,
  COMMIT_VERSION,
  COMMIT_TIMESTAMP,
  json,
  JSON_ROW,
  TOMBSTONE,
} from './model.js';
export { Batch, Row, Output, log, exportTransform } from './guest.js';
