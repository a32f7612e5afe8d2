// Package {{package}} is a Sluice transform.
//
// It emits inserts and update post-images as JSON objects of the row, deletes as
// tombstones, keyed by the column the `key` parameter names (keyless when it is not
// set), with the change type in a `change_type` header. Update pre-images are dropped.
// The host selects and encodes the records natively (Output.Encode); see the SDK's
// README for reading rows yourself.
package {{package}}

import "sluice.dev/sluice"

var key string

func init() {
	sluice.OnInit(func(params sluice.Params) error {
		key = params.Get("key", "")
		return nil
	})
	sluice.OnBatch(func(batch *sluice.Batch, out *sluice.Output) error {
		spec := sluice.EncodeSpec{
			Rows:              batch.SelectChangeTypes(sluice.Insert, sluice.UpdatePostimage, sluice.Delete),
			Value:             sluice.JSONRow(),
			DeleteAsTombstone: true,
			Headers:           []sluice.Named{{Name: "change_type", Value: sluice.RowChangeType()}},
		}
		if key != "" {
			spec.Key = sluice.ColumnValue(key)
		}
		_, err := out.Encode(spec)
		return err
	})
}
