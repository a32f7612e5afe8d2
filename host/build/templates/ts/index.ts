// {{name}}: a Sluice transform.
//
// Emits inserts and update post-images as JSON objects of the row, deletes as
// tombstones, keyed by the column the `key` parameter names (keyless when it is not
// set), with the change type in a `change_type` header. Update pre-images are dropped.

import {
  type Batch,
  CHANGE_TYPE,
  ChangeType,
  JSON_ROW,
  type Output,
  type Params,
  type Transform,
  column,
  exportTransform,
} from '@sluice/transform';

class Changes implements Transform {
  private key?: string;

  init(params: Params): void {
    this.key = params.get('key');
  }

  transform(batch: Batch, out: Output): void {
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
