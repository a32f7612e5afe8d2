// Package accountpipeline is account-pipeline in Go: open deals per account, kept in
// the pipeline's state and emitted whenever a count changes. It makes the same records
// and keeps the same state, byte for byte, as the Rust `account-pipeline`, so either
// can take over from the other.
//
// State: `deal/<documentId>` holds the group of each open deal, `open/<group>` the
// count per group. A record keyed by the group carries `{"account": …, "open_deals":
// n}`, or is a tombstone when the group has no open deal left.
//
// Parameters: `group_by`, the column deals are counted by (default
// `fullDocument.account_id`); `open_status`, the `fullDocument.status` of an open deal
// (default `open`).
package accountpipeline

import (
	"fmt"
	"strings"

	"sluice.dev/sluice"
)

var groupBy, openStatus string

func init() {
	sluice.OnInit(func(params sluice.Params) error {
		groupBy = params.Get("group_by", "fullDocument.account_id")
		openStatus = params.Get("open_status", "open")
		return nil
	})
	sluice.OnBatch(transform)
}

// jsonString is text as a JSON string, escaped as the Rust example escapes it.
func jsonString(text string) string {
	var quoted strings.Builder
	quoted.WriteByte('"')
	for _, c := range text {
		switch {
		case c == '"':
			quoted.WriteString(`\"`)
		case c == '\\':
			quoted.WriteString(`\\`)
		case c < 0x20:
			fmt.Fprintf(&quoted, `\u%04x`, c)
		default:
			quoted.WriteRune(c)
		}
	}
	quoted.WriteByte('"')
	return quoted.String()
}

func transform(batch *sluice.Batch, out *sluice.Output) error {
	ids, err := batch.Column("documentId")
	if err != nil {
		return err
	}
	groups, err := batch.Column(groupBy)
	if err != nil {
		return err
	}
	statuses, err := batch.Column("fullDocument.status")
	if err != nil {
		return err
	}
	// Groups whose count changed, with the last row that changed each, in the order
	// they were first changed.
	var order []string
	last := map[string]int{}
	touch := func(group string, row int) {
		if _, seen := last[group]; !seen {
			order = append(order, group)
		}
		last[group] = row
	}
	state := sluice.State
	for row := 0; row < batch.Rows(); row++ {
		id, ok := ids.String(row)
		if !ok {
			return sluice.FailRow(row, "The row has no documentId.")
		}
		var nowOpen string
		open := false
		switch batch.ChangeType(row) {
		case sluice.UpdatePreimage:
			continue
		case sluice.Delete:
		default:
			if status, _ := statuses.String(row); status == openStatus {
				nowOpen, _ = groups.String(row)
				open = true
			}
		}
		key := "deal/" + id
		wasOpen, was := state.GetString(key)
		if was == open && wasOpen == nowOpen {
			continue
		}
		if was {
			state.Add("open/"+wasOpen, -1)
			touch(wasOpen, row)
		}
		if open {
			state.PutString(key, nowOpen)
			state.Add("open/"+nowOpen, 1)
			touch(nowOpen, row)
		} else {
			state.DeleteKey(key)
		}
	}
	for _, group := range order {
		count, _ := state.GetInt("open/" + group)
		var value []byte
		if count != 0 {
			value = fmt.Appendf(nil, `{"account":%s,"open_deals":%d}`, jsonString(group), count)
		}
		out.EmitKV(last[group], []byte(group), value)
	}
	return nil
}
