// Package golddeals is gold-deals in Go: CRM deal changes from the bronze table to the
// gold topic, as the `deal_gold1` Delta Live Tables query shapes them. It makes the
// same records, byte for byte, as the Rust `gold-deals`.
//
// The module only describes the records (Output.Encode); the host selects and encodes
// them natively.
//
// Parameter `change_types` (default `insert,update_postimage,delete`): the change types
// to emit. Parameter `change_type_header`: when set, every record carries the row's
// change type in a header of that name.
package golddeals

import (
	"fmt"
	"strings"

	"sluice.dev/sluice"
)

var (
	emit    []sluice.ChangeType
	headers []sluice.Named
)

// Spark's substring(x, 11, 24): the hex inside ObjectId('...').
var gold = sluice.JSON(
	sluice.Named{Name: "documentId", Value: sluice.ColumnValue("documentId")},
	sluice.Named{Name: "eventTimestamp", Value: sluice.ColumnValue("eventTimestamp")},
	sluice.Named{Name: "owner_id", Value: sluice.Substring("fullDocument.owner_id", 11, 24)},
	sluice.Named{Name: "owner_type", Value: sluice.ColumnValue("fullDocument.owner_type")},
	sluice.Named{Name: "account_id", Value: sluice.Substring("fullDocument.account_id", 11, 24)},
	sluice.Named{Name: "manager_account_id", Value: sluice.Substring("fullDocument.manager_account_id", 11, 24)},
	sluice.Named{Name: "hubspot_deal_id", Value: sluice.ColumnValue("fullDocument.hubspot_deal_id")},
	sluice.Named{Name: "stage", Value: sluice.ColumnValue("fullDocument.stage")},
	sluice.Named{Name: "status", Value: sluice.ColumnValue("fullDocument.status")},
	sluice.Named{Name: "title", Value: sluice.ColumnValue("fullDocument.title")},
)

func init() {
	sluice.OnInit(func(params sluice.Params) error {
		emit = nil
		for _, name := range strings.Split(params.Get("change_types", "insert,update_postimage,delete"), ",") {
			change, ok := sluice.ParseChangeType(name)
			if !ok {
				return fmt.Errorf("Parameter change_types has an unknown change type `%s`; use insert, update_preimage, update_postimage or delete.", name)
			}
			emit = append(emit, change)
		}
		headers = nil
		if header, ok := params["change_type_header"]; ok {
			headers = []sluice.Named{{Name: header, Value: sluice.RowChangeType()}}
		}
		return nil
	})
	sluice.OnBatch(func(batch *sluice.Batch, out *sluice.Output) error {
		_, err := out.Encode(sluice.EncodeSpec{
			Rows:              batch.SelectChangeTypes(emit...),
			Key:               sluice.ColumnValue("documentId"),
			Value:             gold,
			DeleteAsTombstone: true,
			Headers:           headers,
		})
		return err
	})
}
