// Package sluicetest runs a transform natively in unit tests: a batch of rows in
// memory, the registered init and batch functions called as the host calls them, and
// the records they emitted.
//
//	result, err := sluicetest.Run(sluicetest.Batch{
//		Columns: []sluicetest.Column{{Name: "documentId", Values: []any{"d1", nil}}},
//	}, map[string]string{"stage": "closedwon"})
//
// Row access, SelectChangeTypes and SelectWhere work as in the host; Output.Encode is
// the host's native encoder and only runs there: test such transforms with
// `sluice preview` on a small table.
package sluicetest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"sluice.dev/sluice"
	"sluice.dev/sluice/abi"
)

// Batch is a batch held in memory. ChangeTypes default to inserts, CommitVersions to 1
// and CommitTimestamps (microseconds since the epoch) to 0.
type Batch struct {
	Columns          []Column
	ChangeTypes      []sluice.ChangeType
	CommitVersions   []int64
	CommitTimestamps []int64
}

// Column is a data column (struct fields by dotted path): one value per row, each a
// string, an integer, a float, a bool, a []byte or nil, all of one type.
type Column struct {
	Name   string
	Values []any
}

// Emitted is a record the transform emitted. A nil Key is no key, a nil Value a
// tombstone; Framed says it was emitted with EmitFramed (its bytes are as the module
// made them: the host frames them).
type Emitted struct {
	Row       int
	Key       []byte
	Value     []byte
	Topic     string
	Partition *int32
	Headers   []sluice.Header
	Framed    bool
}

// Rejection is a row the transform rejected, with the first reason given.
type Rejection struct {
	Row     int
	Message string
}

// Result is what a transform made of a batch.
type Result struct {
	Records  []Emitted
	Rejected []Rejection
	// Logs are the messages the transform wrote, as "LEVEL message".
	Logs []string
}

// ClearState empties the keyed state the transform sees (sluice.State, a map in
// memory in unit tests); Run keeps it from one call to the next, as the pipeline keeps
// it from batch to batch.
func ClearState() { abi.SetState(abi.NewMemoryState()) }

// Run calls the registered init function with params and the batch function on batch,
// as the host does. A RowError or any other error the transform returns comes back
// with what it emitted before.
func Run(batch Batch, params map[string]string) (Result, error) {
	module := abi.Registered()
	if module == nil {
		return Result{}, errors.New("no transform is registered: call sluice.OnBatch from an init function of the package under test")
	}
	host, err := newHost(batch)
	if err != nil {
		return Result{}, err
	}
	abi.SetLogger(func(level abi.LogLevel, message string) {
		host.result.Logs = append(host.result.Logs, levelNames[level]+" "+message)
	})
	pairs := make([][2]string, 0, len(params))
	for name, value := range params {
		pairs = append(pairs, [2]string{name, value})
	}
	if err := module.Init(pairs); err != nil {
		return host.result, fmt.Errorf("init failed: %w", err)
	}
	err = module.Transform(host)
	return host.result, err
}

var levelNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

// host is abi.Batch over a Batch, collecting what the transform emits.
type host struct {
	rows    int
	columns []abi.Column
	batch   Batch
	result  Result
}

func newHost(b Batch) (*host, error) {
	h := &host{rows: -1, batch: b}
	for _, c := range b.Columns {
		column, err := column(c)
		if err != nil {
			return nil, err
		}
		if h.rows >= 0 && len(c.Values) != h.rows {
			return nil, fmt.Errorf("column %s has %d values, column %s %d: every column needs one per row", c.Name, len(c.Values), b.Columns[0].Name, h.rows)
		}
		h.rows = len(c.Values)
		h.columns = append(h.columns, column)
	}
	if h.rows < 0 {
		h.rows = len(b.ChangeTypes)
	}
	h.batch.ChangeTypes = filled(b.ChangeTypes, h.rows, sluice.Insert)
	h.batch.CommitVersions = filled(b.CommitVersions, h.rows, 1)
	h.batch.CommitTimestamps = filled(b.CommitTimestamps, h.rows, 0)
	for name, n := range map[string]int{"ChangeTypes": len(h.batch.ChangeTypes), "CommitVersions": len(h.batch.CommitVersions), "CommitTimestamps": len(h.batch.CommitTimestamps)} {
		if n != h.rows {
			return nil, fmt.Errorf("%s has %d entries for %d rows", name, n, h.rows)
		}
	}
	return h, nil
}

func filled[T any](list []T, n int, fill T) []T {
	if list != nil {
		return list
	}
	out := make([]T, n)
	for i := range out {
		out[i] = fill
	}
	return out
}

// column is a test column in the contract's form, its kind told by its values.
func column(c Column) (abi.Column, error) {
	col := abi.Column{Name: c.Name, Kind: abi.Utf8, Valid: make([]bool, len(c.Values))}
	kind := -1
	for row, value := range c.Values {
		if value == nil {
			continue
		}
		col.Valid[row] = true
		var k abi.Kind
		switch value.(type) {
		case string:
			k = abi.Utf8
		case int, int32, int64:
			k = abi.Int64
		case float32, float64:
			k = abi.Float64
		case bool:
			k = abi.Boolean
		case []byte:
			k = abi.Binary
		default:
			return col, fmt.Errorf("column %s row %d: %T is not a string, integer, float, bool or []byte", c.Name, row, value)
		}
		if kind >= 0 && abi.Kind(kind) != k {
			return col, fmt.Errorf("column %s mixes types: row %d holds %T", c.Name, row, value)
		}
		kind = int(k)
	}
	if kind >= 0 {
		col.Kind = abi.Kind(kind)
	}
	n := len(c.Values)
	switch col.Kind {
	case abi.Utf8:
		col.Strings = make([]string, n)
	case abi.Int64:
		col.Ints = make([]int64, n)
	case abi.Float64:
		col.Floats = make([]float64, n)
	case abi.Boolean:
		col.Bools = make([]bool, n)
	case abi.Binary:
		col.Bytes = make([][]byte, n)
	}
	for row, value := range c.Values {
		switch v := value.(type) {
		case string:
			col.Strings[row] = v
		case int:
			col.Ints[row] = int64(v)
		case int32:
			col.Ints[row] = int64(v)
		case int64:
			col.Ints[row] = v
		case float32:
			col.Floats[row] = float64(v)
		case float64:
			col.Floats[row] = v
		case bool:
			col.Bools[row] = v
		case []byte:
			col.Bytes[row] = v
		}
	}
	return col, nil
}

func (h *host) NumRows() uint32 { return uint32(h.rows) }

func (h *host) Columns(names []string) ([]abi.Column, error) {
	if len(names) == 0 {
		return h.columns, nil
	}
	var found []abi.Column
	for _, name := range names {
		i := slices.IndexFunc(h.columns, func(c abi.Column) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("The batch has no column named `%s`.", name)
		}
		found = append(found, h.columns[i])
	}
	return found, nil
}

func (h *host) ChangeTypes() []abi.ChangeType { return h.batch.ChangeTypes }
func (h *host) CommitVersions() []int64       { return h.batch.CommitVersions }
func (h *host) CommitTimestamps() []int64     { return h.batch.CommitTimestamps }

func (h *host) rowsOf(within []uint32) []uint32 {
	if within != nil {
		return within
	}
	all := make([]uint32, h.rows)
	for i := range all {
		all[i] = uint32(i)
	}
	return all
}

func (h *host) SelectChangeTypes(types []abi.ChangeType, within []uint32) []uint32 {
	selected := []uint32{}
	for _, row := range h.rowsOf(within) {
		if slices.Contains(types, h.batch.ChangeTypes[row]) {
			selected = append(selected, row)
		}
	}
	return selected
}

func (h *host) SelectWhere(p abi.Predicate, within []uint32) ([]uint32, error) {
	columns, err := h.Columns([]string{p.Column})
	if err != nil {
		return nil, err
	}
	c := columns[0]
	selected := []uint32{}
	for _, row := range h.rowsOf(within) {
		keep, err := holds(&c, int(row), p)
		if err != nil {
			return nil, err
		}
		if keep {
			selected = append(selected, row)
		}
	}
	return selected, nil
}

// holds says whether the predicate holds for the row's value.
func holds(c *abi.Column, row int, p abi.Predicate) (bool, error) {
	switch p.Op {
	case abi.IsNull:
		return !c.Valid[row], nil
	case abi.IsNotNull:
		return c.Valid[row], nil
	}
	if !c.Valid[row] || p.Value.Kind == abi.Null {
		return false, nil
	}
	constant := p.Value.Float
	if p.Value.Kind == abi.Integer {
		constant = float64(p.Value.Int)
	}
	var order int
	switch {
	case c.Strings != nil && p.Value.Kind == abi.String:
		order = cmp.Compare(c.Strings[row], p.Value.Text)
	case c.Ints != nil && p.Value.Kind == abi.Integer:
		order = cmp.Compare(c.Ints[row], p.Value.Int)
	case c.Ints != nil && p.Value.Kind == abi.Float:
		order = cmp.Compare(float64(c.Ints[row]), constant)
	case c.Floats != nil && (p.Value.Kind == abi.Float || p.Value.Kind == abi.Integer):
		// NaN compares as nothing, as on the host.
		if math.IsNaN(c.Floats[row]) || math.IsNaN(constant) {
			return false, nil
		}
		order = cmp.Compare(c.Floats[row], constant)
	case c.Bools != nil && p.Value.Kind == abi.Bool:
		order = cmp.Compare(boolOrder(c.Bools[row]), boolOrder(p.Value.Bool))
	default:
		return false, fmt.Errorf("Cannot compare column `%s` (%s) with %s.", c.Name, kindNames[c.Kind], described(p.Value))
	}
	switch p.Op {
	case abi.Equal:
		return order == 0, nil
	case abi.NotEqual:
		return order != 0, nil
	case abi.Less:
		return order < 0, nil
	case abi.LessOrEqual:
		return order <= 0, nil
	case abi.Greater:
		return order > 0, nil
	default:
		return order >= 0, nil
	}
}

// kindNames name a column's kind as the host's messages do.
var kindNames = map[abi.Kind]string{
	abi.Boolean: "boolean", abi.Int32: "integer", abi.Int64: "integer", abi.Float32: "floating point",
	abi.Float64: "floating point", abi.Utf8: "string", abi.Binary: "binary", abi.Date: "date",
	abi.Timestamp: "timestamp", abi.TimestampNtz: "timestamp", abi.Decimal: "decimal", abi.Text: "nested",
}

// described shows a constant as the host's messages do.
func described(s abi.Scalar) string {
	switch s.Kind {
	case abi.Bool:
		return fmt.Sprintf("Boolean(%t)", s.Bool)
	case abi.Integer:
		return fmt.Sprintf("Integer(%d)", s.Int)
	case abi.Float:
		return fmt.Sprintf("Float(%v)", s.Float)
	case abi.String:
		return fmt.Sprintf("Text(%q)", s.Text)
	}
	return "Null"
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (h *host) EmitEncoded(abi.EncodeSpec) (uint32, error) {
	return 0, errors.New("Output.Encode runs in the host's native encoder, not in unit tests: test this transform with `sluice preview` on a small table")
}

func (h *host) EmitPacked(records abi.PackedRecords) { h.unpack(records, false) }

// EmitFramed keeps the module's bytes: the host frames them.
func (h *host) EmitFramed(records abi.PackedRecords, _ abi.Framing) { h.unpack(records, true) }

func (h *host) Reject(row uint32, message string) {
	// As on the host: one rejection per row, the first reason kept.
	for _, r := range h.result.Rejected {
		if r.Row == int(row) {
			return
		}
	}
	h.result.Rejected = append(h.result.Rejected, Rejection{int(row), message})
}

// unpack adds packed records to the result.
func (h *host) unpack(p abi.PackedRecords, framed bool) {
	at, header := 0, 0
	take := func(length int) []byte {
		if length < 0 {
			return nil
		}
		bytes := append([]byte{}, p.Data[at:at+length]...)
		at += length
		return bytes
	}
	for i, row := range p.SourceRows {
		r := Emitted{Row: int(row), Framed: framed}
		r.Key = take(int(p.KeyLengths[i]))
		r.Value = take(int(p.ValueLengths[i]))
		if len(p.TopicIndexes) > 0 && p.TopicIndexes[i] > 0 {
			r.Topic = p.Topics[p.TopicIndexes[i]-1]
		}
		if len(p.Partitions) > 0 && p.Partitions[i] >= 0 {
			r.Partition = sluice.Partition(p.Partitions[i])
		}
		if len(p.HeaderCounts) > 0 {
			for range p.HeaderCounts[i] {
				name := p.HeaderNames[p.HeaderNameIndexes[header]]
				r.Headers = append(r.Headers, sluice.Header{Key: name, Value: take(int(p.HeaderValueLengths[header]))})
				header++
			}
		}
		h.result.Records = append(h.result.Records, r)
	}
}
