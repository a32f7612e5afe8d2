package sluice

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/abi"
)

// suiteBytes is a key, value or header of the conformance suite: UTF-8 text, or
// {"hex": ...} for raw bytes.
type suiteBytes []byte

func (b *suiteBytes) UnmarshalJSON(data []byte) error {
	var text string
	if json.Unmarshal(data, &text) == nil {
		*b = []byte(text)
		return nil
	}
	var raw struct{ Hex string }
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	bytes, err := hex.DecodeString(raw.Hex)
	*b = bytes
	return err
}

type packingCase struct {
	Name    string
	Records []struct {
		Row       uint32
		Key       *suiteBytes
		Value     *suiteBytes
		Topic     string
		Partition *int32
		Headers   [][2]json.RawMessage
	}
	Packed struct {
		Data               string
		SourceRows         []uint32 `json:"source_rows"`
		KeyLengths         []int32  `json:"key_lengths"`
		ValueLengths       []int32  `json:"value_lengths"`
		Topics             []string
		TopicIndexes       []uint32 `json:"topic_indexes"`
		Partitions         []int32
		HeaderNames        []string `json:"header_names"`
		HeaderCounts       []uint32 `json:"header_counts"`
		HeaderNameIndexes  []uint32 `json:"header_name_indexes"`
		HeaderValueLengths []uint32 `json:"header_value_lengths"`
	}
}

func optional(b *suiteBytes) []byte {
	if b == nil {
		return nil
	}
	if *b == nil {
		return []byte{}
	}
	return *b
}

// emptyAsNil makes nil and empty lists compare equal, as they cross the same way.
func emptyAsNil(p abi.PackedRecords) abi.PackedRecords {
	v := reflect.ValueOf(&p).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Len() == 0 {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return p
}

// packingFailures names the cases of packing.json that pack gets wrong.
func packingFailures(t *testing.T, pack func(records []Record, rows []uint32) abi.PackedRecords) []string {
	file, err := os.ReadFile("../conformance/packing.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct{ Cases []packingCase }
	if err := json.Unmarshal(file, &suite); err != nil {
		t.Fatal(err)
	}
	var failures []string
	for _, c := range suite.Cases {
		var records []Record
		var rows []uint32
		for _, r := range c.Records {
			record := Record{Key: optional(r.Key), Value: optional(r.Value), Topic: r.Topic, Partition: r.Partition}
			for _, pair := range r.Headers {
				var name string
				var value suiteBytes
				if err := json.Unmarshal(pair[0], &name); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(pair[1], &value); err != nil {
					t.Fatal(err)
				}
				record.Headers = append(record.Headers, Header{Key: name, Value: optional(&value)})
			}
			records = append(records, record)
			rows = append(rows, r.Row)
		}
		data, err := hex.DecodeString(c.Packed.Data)
		if err != nil {
			t.Fatal(err)
		}
		p := c.Packed
		expected := abi.PackedRecords{
			Data: data, SourceRows: p.SourceRows, KeyLengths: p.KeyLengths, ValueLengths: p.ValueLengths,
			Topics: p.Topics, TopicIndexes: p.TopicIndexes, Partitions: p.Partitions, HeaderNames: p.HeaderNames,
			HeaderCounts: p.HeaderCounts, HeaderNameIndexes: p.HeaderNameIndexes, HeaderValueLengths: p.HeaderValueLengths,
		}
		if made := pack(records, rows); !reflect.DeepEqual(emptyAsNil(made), emptyAsNil(expected)) {
			failures = append(failures, c.Name+": made "+strings.TrimSpace(jsonText(made)))
		}
	}
	return failures
}

func jsonText(v any) string {
	text, _ := json.Marshal(v)
	return string(text)
}

func packAsTheSDKDoes(records []Record, rows []uint32) abi.PackedRecords {
	var p packer
	for i := range records {
		p.add(rows[i], &records[i])
	}
	return p.take()
}

func TestThePackerMakesThePackedListsOfEveryConformanceCase(t *testing.T) {
	if failures := packingFailures(t, packAsTheSDKDoes); len(failures) > 0 {
		t.Fatalf("%d cases fail:\n%s", len(failures), strings.Join(failures, "\n"))
	}
}

func TestAPackerThatForgetsEmptyHeaderValuesFailsTheSuite(t *testing.T) {
	failures := packingFailures(t, func(records []Record, rows []uint32) abi.PackedRecords {
		for i := range records {
			records[i].Headers = slices.DeleteFunc(records[i].Headers, func(h Header) bool { return len(h.Value) == 0 })
		}
		return packAsTheSDKDoes(records, rows)
	})
	if len(failures) == 0 || !strings.HasPrefix(failures[0], "header names are listed once") {
		t.Fatalf("the broken packer passed: %v", failures)
	}
}
