package sluicetest

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice"
	"sluice.dev/sluice/abi"
)

type selectionSuite struct {
	Batch struct {
		Columns []struct {
			Name   string
			Type   string
			Values []json.RawMessage
		}
		ChangeTypes []string `json:"change_types"`
	}
	Cases []struct {
		Name              string
		SelectChangeTypes *struct {
			Types  []string
			Within []uint32
		} `json:"select_change_types"`
		SelectWhere *struct {
			Column string
			Op     string
			Value  json.RawMessage
			Within []uint32
		} `json:"select_where"`
		Rows  []uint32
		Error string
	}
}

var comparisons = map[string]abi.Comparison{
	"==": abi.Equal, "!=": abi.NotEqual, "<": abi.Less, "<=": abi.LessOrEqual,
	">": abi.Greater, ">=": abi.GreaterOrEqual, "is null": abi.IsNull, "is not null": abi.IsNotNull,
}

// suiteValue is a column value of the suite in the form Batch takes.
func suiteValue(t *testing.T, kind string, raw json.RawMessage) any {
	if string(raw) == "null" {
		return nil
	}
	var value any
	var err error
	switch kind {
	case "long":
		value, err = decoded[int64](raw)
	case "double":
		value, err = decoded[float64](raw)
	case "string":
		value, err = decoded[string](raw)
	case "boolean":
		value, err = decoded[bool](raw)
	case "binary":
		var v struct{ Hex string }
		if err = json.Unmarshal(raw, &v); err == nil {
			value, err = hex.DecodeString(v.Hex)
		}
	default:
		t.Fatalf("the suite has no type %s", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return value
}

func decoded[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// constant is a predicate's constant as the SDK makes it: a JSON integer an Integer, a
// fraction a Float.
func constant(t *testing.T, text string) abi.Scalar {
	var value any
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.UseNumber()
	if err := decoder.Decode(&value); err != nil {
		t.Fatal(err)
	}
	switch v := value.(type) {
	case nil:
		return abi.Scalar{Kind: abi.Null}
	case bool:
		return abi.Scalar{Kind: abi.Bool, Bool: v}
	case string:
		return abi.Scalar{Kind: abi.String, Text: v}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return abi.Scalar{Kind: abi.Integer, Int: i}
		}
		f, err := v.Float64()
		if err != nil {
			t.Fatal(err)
		}
		return abi.Scalar{Kind: abi.Float, Float: f}
	}
	t.Fatalf("not a constant: %s", text)
	return abi.Scalar{}
}

func TestSelectionsMatchTheHostOnEveryConformanceCase(t *testing.T) {
	file, err := os.ReadFile("../../conformance/selections.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite selectionSuite
	if err := json.Unmarshal(file, &suite); err != nil {
		t.Fatal(err)
	}
	var batch Batch
	for _, c := range suite.Batch.Columns {
		column := Column{Name: c.Name}
		for _, raw := range c.Values {
			column.Values = append(column.Values, suiteValue(t, c.Type, raw))
		}
		batch.Columns = append(batch.Columns, column)
	}
	for _, name := range suite.Batch.ChangeTypes {
		change, ok := sluice.ParseChangeType(name)
		if !ok {
			t.Fatalf("unknown change type %s", name)
		}
		batch.ChangeTypes = append(batch.ChangeTypes, change)
	}
	h, err := newHost(batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range suite.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var rows []uint32
			var err error
			if call := c.SelectChangeTypes; call != nil {
				if c.Error != "" {
					t.Skip("Go's selections narrow only earlier selections, so a row past the batch cannot be asked for.")
				}
				var types []abi.ChangeType
				for _, name := range call.Types {
					change, _ := sluice.ParseChangeType(name)
					types = append(types, change)
				}
				rows = h.SelectChangeTypes(types, call.Within)
			} else {
				call := c.SelectWhere
				op, ok := comparisons[call.Op]
				if !ok {
					t.Fatalf("unknown comparison %s", call.Op)
				}
				rows, err = h.SelectWhere(abi.Predicate{Column: call.Column, Op: op, Value: constant(t, string(call.Value))}, call.Within)
			}
			switch {
			case c.Error != "" && (err == nil || !strings.Contains(err.Error(), c.Error)):
				t.Fatalf("expected an error containing %q, got rows %v and error %v", c.Error, rows, err)
			case c.Error == "" && err != nil:
				t.Fatal(err)
			case c.Error == "" && !slices.Equal(rows, c.Rows) && len(rows)+len(c.Rows) > 0:
				t.Fatalf("selected %v, expected %v", rows, c.Rows)
			}
		})
	}
}
