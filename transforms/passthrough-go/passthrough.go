// Package passthrough is the pass-through in Go: every change row as a JSON object of
// its data columns (struct fields under dotted names; dates in days and timestamps in
// microseconds since the epoch) and its change columns, keyless. It reads rows one by
// one, so it shows the SDK's row API.
//
// Parameter `deletes_topic`: when set, delete rows go to that topic instead of the
// pipeline's. Parameter `json_schema`: when set (a JSON Schema's text), the values are
// framed with it: the host registers it and writes Confluent's wire format.
package passthrough

import (
	"math"
	"strconv"

	"sluice.dev/sluice"
)

var (
	deletesTopic string
	framing      *sluice.Framing
)

func init() {
	sluice.OnInit(func(params sluice.Params) error {
		deletesTopic = params.Get("deletes_topic", "")
		framing = nil
		if schema, ok := params["json_schema"]; ok {
			framing = &sluice.Framing{Value: sluice.JSONSchema(schema)}
		}
		return nil
	})
	sluice.OnBatch(transform)
}

func transform(batch *sluice.Batch, out *sluice.Output) error {
	columns, err := batch.Columns()
	if err != nil {
		return err
	}
	var json []byte
	for row := range batch.Rows() {
		json = append(json[:0], '{')
		for _, column := range columns {
			if column.IsNull(row) {
				continue
			}
			json = appendString(json, column.Name())
			json = append(json, ':')
			if s, ok := column.String(row); ok {
				json = appendString(json, s)
			} else if b, ok := column.Bytes(row); ok {
				json = appendString(json, string(b))
			} else if i, ok := column.Int(row); ok {
				json = strconv.AppendInt(json, i, 10)
			} else if f, ok := column.Float(row); ok {
				json = appendFloat(json, f)
			} else if b, ok := column.Bool(row); ok {
				json = strconv.AppendBool(json, b)
			}
			json = append(json, ',')
		}
		change := batch.ChangeType(row)
		json = append(json, `"_change_type":`...)
		json = appendString(json, change.String())
		json = append(json, `,"_commit_version":`...)
		json = strconv.AppendInt(json, batch.CommitVersion(row), 10)
		json = append(json, `,"_commit_timestamp":`...)
		json = strconv.AppendInt(json, batch.CommitTimestamp(row), 10)
		json = append(json, '}')
		record := sluice.Record{Value: json}
		if change == sluice.Delete {
			record.Topic = deletesTopic
		}
		if framing != nil {
			out.EmitFramed(row, framing, record)
		} else {
			out.Emit(row, record)
		}
	}
	return nil
}

// appendFloat appends f as C's printf("%.17g") writes it, as the C pass-through does.
func appendFloat(json []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(json, "nan"...)
	case math.IsInf(f, 1):
		return append(json, "inf"...)
	case math.IsInf(f, -1):
		return append(json, "-inf"...)
	}
	return strconv.AppendFloat(json, f, 'g', 17, 64)
}

// appendString appends s as a JSON string.
func appendString(json []byte, s string) []byte {
	const hex = "0123456789abcdef"
	json = append(json, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			json = append(json, '\\', c)
		case c < 0x20:
			json = append(json, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			json = append(json, c)
		}
	}
	return append(json, '"')
}
