// Pass-through in JavaScript: every change row as a JSON object of its data columns
// (struct fields under dotted names) and its change columns, keyless. Reads rows one
// by one, so it shows the SDK's row API.
//
// Parameter `deletes_topic`: when set, delete rows go to that topic instead of the
// pipeline's. Parameter `json_schema`: when set (a JSON Schema's text), the values are
// framed with it: the host registers it and writes Confluent's wire format.

import { ChangeType, exportTransform, jsonSchema } from '@sluice/transform';

// Delta `long` columns arrive as bigints, which JSON.stringify refuses.
const replacer = (_name, value) => (typeof value === 'bigint' ? value.toString() : value);

class Passthrough {
  init(params) {
    this.deletesTopic = params.get('deletes_topic');
    const schema = params.get('json_schema');
    this.framing = schema ? { value: jsonSchema(schema) } : undefined;
  }

  transform(batch, out) {
    for (const row of batch.rows()) {
      const value = {
        ...row.toObject(),
        _change_type: row.changeType,
        _commit_version: row.commitVersion,
        _commit_timestamp: new Date(Number(row.commitTimestamp / 1000n)).toISOString(),
      };
      const topic = row.changeType === ChangeType.Delete ? this.deletesTopic : undefined;
      const record = { value: JSON.stringify(value, replacer), topic };
      if (this.framing) out.emitFramed(row, this.framing, record);
      else out.emit(row, record);
    }
  }
}

export const transformer = exportTransform(Passthrough);
