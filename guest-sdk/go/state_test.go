package sluice

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"sluice.dev/sluice/abi"
)

type stateCase struct {
	Name  string
	Steps []map[string]json.RawMessage
	State [][2]suiteBytes
}

// stateStep runs one step of the suite; it returns what the step gives, as the
// suite's JSON would say it, or nil for a step that gives nothing.
func stateStep(t *testing.T, op string, raw json.RawMessage) any {
	var args []json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		t.Fatal(err)
	}
	bytesOf := func(i int) []byte {
		var b suiteBytes
		if err := json.Unmarshal(args[i], &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	number := func(i int) int64 {
		var n int64
		if err := json.Unmarshal(args[i], &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	shown := func(b []byte, ok bool) any {
		if !ok {
			return nil
		}
		return hexOf(b)
	}
	key := func() string { return string(bytesOf(0)) }
	switch op {
	case "put":
		State.Put(bytesOf(0), bytesOf(1))
	case "put_str":
		State.PutString(key(), string(bytesOf(1)))
	case "put_number":
		State.PutInt(key(), number(1))
	case "add":
		return float64(State.Add(key(), number(1)))
	case "delete":
		State.Delete(bytesOf(0))
	case "get":
		return shown(State.Get(bytesOf(0)))
	case "get_str":
		value, ok := State.GetString(key())
		if !ok {
			return nil
		}
		return value
	case "get_number":
		value, ok := State.GetInt(key())
		if !ok {
			return nil
		}
		return float64(value)
	case "get_many":
		var keys []suiteBytes
		if err := json.Unmarshal(args[0], &keys); err != nil {
			t.Fatal(err)
		}
		asked := make([][]byte, len(keys))
		for i, k := range keys {
			asked[i] = k
		}
		var got []any
		for _, value := range State.GetMany(asked) {
			got = append(got, shown(value, value != nil))
		}
		return got
	case "scan":
		var after []byte
		if string(args[1]) != "null" {
			after = bytesOf(1)
		}
		got := []any{}
		for _, entry := range State.Scan(bytesOf(0), after, uint32(number(2))) {
			got = append(got, []any{hexOf(entry.Key), hexOf(entry.Value)})
		}
		return got
	default:
		t.Fatalf("unknown step %s", op)
	}
	return nil
}

// expectedOf is a step's `returns` in the terms stateStep gives.
func expectedOf(t *testing.T, op string, raw json.RawMessage) any {
	asHex := func(raw json.RawMessage) any {
		if string(raw) == "null" {
			return nil
		}
		var b suiteBytes
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		return hexOf(b)
	}
	var list []json.RawMessage
	switch op {
	case "get":
		return asHex(raw)
	case "get_many":
		_ = json.Unmarshal(raw, &list)
		var out []any
		for _, item := range list {
			out = append(out, asHex(item))
		}
		return out
	case "scan":
		_ = json.Unmarshal(raw, &list)
		out := []any{}
		for _, item := range list {
			var pair []json.RawMessage
			_ = json.Unmarshal(item, &pair)
			out = append(out, []any{asHex(pair[0]), asHex(pair[1])})
		}
		return out
	}
	var value any
	if err := json.Unmarshal(raw, &value); err != nil {
		t.Fatal(err)
	}
	return value
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestStateHelpersPassTheConformanceSuite(t *testing.T) {
	raw, err := os.ReadFile("../conformance/state.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct{ Cases []stateCase }
	if err := json.Unmarshal(raw, &suite); err != nil {
		t.Fatal(err)
	}
	if len(suite.Cases) < 5 {
		t.Fatalf("only %d cases", len(suite.Cases))
	}
	for _, c := range suite.Cases {
		abi.SetState(abi.NewMemoryState())
		for _, step := range c.Steps {
			for op, args := range step {
				if op == "returns" {
					continue
				}
				got := stateStep(t, op, args)
				if want, ok := step["returns"]; ok {
					if expected := expectedOf(t, op, want); !reflect.DeepEqual(got, expected) {
						t.Errorf("%s: %s %s gave %#v, not %#v", c.Name, op, args, got, expected)
					}
				}
			}
		}
		var stored [][2]string
		for _, entry := range State.Entries(nil) {
			stored = append(stored, [2]string{hexOf(entry.Key), hexOf(entry.Value)})
		}
		var want [][2]string
		for _, pair := range c.State {
			want = append(want, [2]string{hexOf(pair[0]), hexOf(pair[1])})
		}
		if !reflect.DeepEqual(stored, want) {
			t.Errorf("%s: stored %v, not %v", c.Name, stored, want)
		}
	}
}

func TestStateJSONAndFloatsRoundTrip(t *testing.T) {
	abi.SetState(abi.NewMemoryState())
	if err := State.PutJSON("deal/1", map[string]any{"stage": "won"}); err != nil {
		t.Fatal(err)
	}
	var deal map[string]string
	if ok, err := State.GetJSON("deal/1", &deal); !ok || err != nil || deal["stage"] != "won" {
		t.Fatalf("%v %v %v", ok, err, deal)
	}
	State.PutFloat("sum", 12.5)
	if text, _ := State.GetString("sum"); text != "12.5" {
		t.Fatalf("stored %q", text)
	}
}
