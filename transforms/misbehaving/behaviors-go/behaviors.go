// Package behaviors is a Go module that breaks the host's limits on purpose, through
// the SDK, for the limit tests. Parameter `behavior`: `loop` (never returns), `hog`
// (grows memory without end), `where` (has the host select the rows whose `documentId`
// is the parameter `id` and encode them as JSON) or `rows` (has the host encode every
// row, whole, in the pipeline's encoding); anything else emits each row keyed by
// `documentId`, its change type as value.
package behaviors

import "sluice.dev/sluice"

var (
	behavior, id string
	// hoard keeps what the hog allocates reachable, so the collector frees none of it.
	hoard [][]byte
	spins uint64
)

func init() {
	sluice.OnInit(func(params sluice.Params) error {
		behavior = params.Get("behavior", "")
		id = params.Get("id", "")
		return nil
	})
	sluice.OnBatch(transform)
}

func transform(batch *sluice.Batch, out *sluice.Output) error {
	switch behavior {
	case "loop":
		for {
			spins++
		}
	case "hog":
		for {
			block := make([]byte, 1<<20)
			for i := range block {
				block[i] = 1
			}
			hoard = append(hoard, block)
		}
	case "where":
		rows, err := batch.SelectWhere("documentId", sluice.Equal, id)
		if err != nil {
			return err
		}
		_, err = out.Encode(sluice.EncodeSpec{Rows: rows, Key: sluice.ColumnValue("documentId")})
		return err
	case "rows":
		all := batch.SelectChangeTypes(sluice.Insert, sluice.UpdatePreimage, sluice.UpdatePostimage, sluice.Delete)
		_, err := out.Encode(sluice.EncodeSpec{Rows: all})
		return err
	}
	ids, err := batch.Column("documentId")
	if err != nil {
		return err
	}
	for row := range batch.Rows() {
		id, ok := ids.String(row)
		if !ok {
			return sluice.FailRow(row, "The deal has no documentId.")
		}
		out.EmitKV(row, []byte(id), []byte(batch.ChangeType(row).String()))
	}
	return nil
}
