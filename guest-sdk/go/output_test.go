package sluice

import (
	"fmt"
	"slices"
	"testing"

	"sluice.dev/sluice/abi"
)

// calls records what reaches the host, in order.
type calls struct {
	abi.Batch
	log []string
}

func (c *calls) EmitPacked(r abi.PackedRecords) {
	c.log = append(c.log, fmt.Sprintf("packed %v", r.SourceRows))
}

func (c *calls) EmitFramed(r abi.PackedRecords, f abi.Framing) {
	c.log = append(c.log, fmt.Sprintf("framed %v %s", r.SourceRows, f.Value.Text))
}

func (c *calls) Reject(row uint32, message string) {
	c.log = append(c.log, fmt.Sprintf("reject %d", row))
}

func TestRecordsCrossInRunsOfOneFramingInEmissionOrder(t *testing.T) {
	host := &calls{}
	out := &Output{host: host}
	avro := &Framing{Value: AvroSchema(`"string"`)}
	json := &Framing{Value: JSONSchema(`{}`)}
	out.EmitKV(0, nil, []byte("a"))
	out.EmitFramed(1, avro, Record{Value: []byte("b")})
	// Framings are compared by content: an equal one joins the run.
	out.EmitFramed(2, &Framing{Value: AvroSchema(`"string"`)}, Record{Value: []byte("c")})
	out.Reject(3, "bad")
	out.EmitFramed(4, avro, Record{Value: []byte("d")})
	out.EmitFramed(5, json, Record{Value: []byte("{}")})
	out.EmitKV(6, nil, []byte("e"))
	out.flush()
	want := []string{"packed [0]", `framed [1 2] "string"`, "reject 3", `framed [4] "string"`, "framed [5] {}", "packed [6]"}
	if !slices.Equal(host.log, want) {
		t.Fatalf("host calls %q, want %q", host.log, want)
	}
}

func TestOptionalListsStayEmptyUntilARecordNeedsThem(t *testing.T) {
	var p packer
	p.add(0, &Record{Key: []byte("k"), Value: []byte("v")})
	p.add(1, &Record{})
	if r := p.records; len(r.TopicIndexes)+len(r.Partitions)+len(r.HeaderCounts) != 0 {
		t.Fatalf("defaults only, yet lists: %+v", r)
	}
	p.add(2, &Record{Value: []byte{}, Topic: "t", Partition: Partition(3), Headers: []Header{{"h", []byte("x")}}})
	r := p.take()
	if !slices.Equal(r.KeyLengths, []int32{1, -1, -1}) || !slices.Equal(r.ValueLengths, []int32{1, -1, 0}) {
		t.Fatalf("lengths %v %v", r.KeyLengths, r.ValueLengths)
	}
	if !slices.Equal(r.TopicIndexes, []uint32{0, 0, 1}) || !slices.Equal(r.Partitions, []int32{-1, -1, 3}) || !slices.Equal(r.HeaderCounts, []uint32{0, 0, 1}) {
		t.Fatalf("optional lists %v %v %v", r.TopicIndexes, r.Partitions, r.HeaderCounts)
	}
	if string(r.Data) != "kvx" || !slices.Equal(r.Topics, []string{"t"}) || !slices.Equal(r.HeaderNames, []string{"h"}) {
		t.Fatalf("data %q topics %v names %v", r.Data, r.Topics, r.HeaderNames)
	}
	if len(p.records.SourceRows) != 0 {
		t.Fatal("take starts afresh")
	}
}

func TestAConstantOfAnUnknownTypeIsRefused(t *testing.T) {
	if _, err := scalar(struct{}{}); err == nil {
		t.Fatal("a struct is no constant")
	}
	out := &Output{host: &calls{}}
	_, err := out.Encode(EncodeSpec{Value: JSON(Named{"x", Constant([]int{1})})})
	if err == nil || err.Error() != "field x: a constant must be a string, bool, integer, float or nil, not []int" {
		t.Fatalf("got %v", err)
	}
}

func TestAFramingChangedAfterUseDoesNotReframeWhatWasEmitted(t *testing.T) {
	host := &calls{}
	out := &Output{host: host}
	framing := &Framing{Value: AvroSchema(`"string"`)}
	out.EmitFramed(0, framing, Record{Value: []byte("a")})
	framing.Value = AvroSchema(`"bytes"`)
	out.EmitFramed(1, framing, Record{Value: []byte("b")})
	out.flush()
	want := []string{`framed [0] "string"`, `framed [1] "bytes"`}
	if !slices.Equal(host.log, want) {
		t.Fatalf("host calls %q, want %q", host.log, want)
	}
}

func TestRecordsEmittedBeforeAnErrorReachTheHost(t *testing.T) {
	host := &calls{}
	OnBatch(func(_ *Batch, out *Output) error {
		out.EmitKV(0, nil, []byte("a"))
		return FailRow(0, "bad")
	})
	err := module.Transform(host)
	if err == nil || err.Error() != "row 0: bad" || !slices.Equal(host.log, []string{"packed [0]"}) {
		t.Fatalf("err %v, host calls %q", err, host.log)
	}
}
