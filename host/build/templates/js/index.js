// {{name}}: a Sluice transform.
//
// Emits inserts and update post-images as JSON objects of the row, deletes as
// tombstones, keyed by the column the `key` parameter names (keyless when it is not
// set), with the change type in a `change_type` header. Update pre-images are dropped.

import { CHANGE_TYPE, ChangeType, JSON_ROW, column, exportTransform } from '@sluice/transform';

class Changes {
  init(params) {
    this.key = params.get('key');
  }

  transform(batch, out) {
    const rows = batch.selectChangeTypes([ChangeType.Insert, ChangeType.UpdatePostimage, ChangeType.Delete]);
    out.encode({
      rows,
      key: this.key ? column(this.key) : undefined,
      value: JSON_ROW,
      deleteAsTombstone: true,
      headers: { change_type: CHANGE_TYPE },
    });
  }
}

// The component exports `transformer`.
export const transformer = exportTransform(Changes);
