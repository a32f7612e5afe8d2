package sluice

import (
	"fmt"
	"time"

	"sluice.dev/sluice/abi"
)

// Batch is one batch of change rows from one Delta table, in commit order. It is valid
// during the batch function it is passed to. Row indexes run from 0 to Rows()-1;
// methods taking one panic on an index out of range, as slices do.
type Batch struct {
	host       abi.Batch
	changes    []ChangeType
	versions   []int64
	timestamps []int64
	columns    []*Column
	byName     map[string]*Column
}

// Rows is the number of rows.
func (b *Batch) Rows() int { return int(b.host.NumRows()) }

// ChangeType is the row's `_change_type`.
func (b *Batch) ChangeType(row int) ChangeType {
	if b.changes == nil {
		b.changes = b.host.ChangeTypes()
	}
	return b.changes[row]
}

// CommitVersion is the Delta version that made the row's change.
func (b *Batch) CommitVersion(row int) int64 {
	if b.versions == nil {
		b.versions = b.host.CommitVersions()
	}
	return b.versions[row]
}

// CommitTimestamp is when the row's change was committed, in microseconds since the
// epoch (UTC).
func (b *Batch) CommitTimestamp(row int) int64 {
	if b.timestamps == nil {
		b.timestamps = b.host.CommitTimestamps()
	}
	return b.timestamps[row]
}

// CommitTime is CommitTimestamp as a time.
func (b *Batch) CommitTime(row int) time.Time {
	return time.UnixMicro(b.CommitTimestamp(row)).UTC()
}

// Columns returns every data column, struct fields as columns named by dotted path.
func (b *Batch) Columns() ([]*Column, error) {
	if b.columns != nil {
		return b.columns, nil
	}
	columns, err := b.host.Columns(nil)
	if err != nil {
		return nil, err
	}
	b.columns = make([]*Column, len(columns))
	b.byName = make(map[string]*Column, len(columns))
	for i := range columns {
		b.columns[i] = &Column{columns[i]}
		b.byName[columns[i].Name] = b.columns[i]
	}
	return b.columns, nil
}

// Column returns the data column called name (a dotted path for a struct field); the
// error names a column the table does not have.
func (b *Batch) Column(name string) (*Column, error) {
	if column, ok := b.byName[name]; ok {
		return column, nil
	}
	columns, err := b.host.Columns([]string{name})
	if err != nil {
		return nil, err
	}
	if len(columns) != 1 {
		return nil, fmt.Errorf("the batch has no column named `%s`", name)
	}
	if b.byName == nil {
		b.byName = map[string]*Column{}
	}
	column := &Column{columns[0]}
	b.byName[name] = column
	return column, nil
}

// Column is one data column: a value per row, typed as the table's column.
type Column struct {
	c abi.Column
}

// Kind is a column's type as the contract gives it.
type Kind = abi.Kind

// The column kinds: integers, dates (days since 1970-01-01) and timestamps
// (microseconds since the epoch) read with Int, floats with Float, strings, decimals
// (exact text) and other types (rendered as text by the host) with String, binary with
// Bytes.
const (
	KindBoolean      = abi.Boolean
	KindInt32        = abi.Int32
	KindInt64        = abi.Int64
	KindFloat32      = abi.Float32
	KindFloat64      = abi.Float64
	KindUtf8         = abi.Utf8
	KindBinary       = abi.Binary
	KindDate         = abi.Date
	KindTimestamp    = abi.Timestamp
	KindTimestampNtz = abi.TimestampNtz
	KindDecimal      = abi.Decimal
	KindText         = abi.Text
)

// Name is the column's name (a dotted path for a struct field).
func (c *Column) Name() string { return c.c.Name }

// Kind is the column's type.
func (c *Column) Kind() Kind { return c.c.Kind }

// IsNull says whether the row's value is null.
func (c *Column) IsNull(row int) bool { return !c.c.Valid[row] }

// String is the value of a string, decimal or text column; false when null or of
// another kind.
func (c *Column) String(row int) (string, bool) {
	if c.c.Strings == nil || !c.c.Valid[row] {
		return "", false
	}
	return c.c.Strings[row], true
}

// Int is the value of an integer, date or timestamp column; false when null or of
// another kind.
func (c *Column) Int(row int) (int64, bool) {
	if c.c.Ints == nil || !c.c.Valid[row] {
		return 0, false
	}
	return c.c.Ints[row], true
}

// Float is the value of a float column; false when null or of another kind.
func (c *Column) Float(row int) (float64, bool) {
	if c.c.Floats == nil || !c.c.Valid[row] {
		return 0, false
	}
	return c.c.Floats[row], true
}

// Bool is the value of a boolean column; false when null or of another kind.
func (c *Column) Bool(row int) (value, ok bool) {
	if c.c.Bools == nil || !c.c.Valid[row] {
		return false, false
	}
	return c.c.Bools[row], true
}

// Bytes is the value of a binary column; false when null or of another kind.
func (c *Column) Bytes(row int) ([]byte, bool) {
	if c.c.Bytes == nil || !c.c.Valid[row] {
		return nil, false
	}
	return c.c.Bytes[row], true
}
