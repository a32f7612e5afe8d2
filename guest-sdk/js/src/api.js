// What the SDK exports in a module and in Node alike; index.js and native.js add the
// log and the export.

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
  avroSchema,
  jsonSchema,
  protobufSchema,
} from './model.js';
export { Batch, Row, Output } from './batch.js';
