package sluice

import (
	"fmt"

	"sluice.dev/sluice/abi"
)

// Selection is rows of a batch, in order, chosen by the host natively.
type Selection struct {
	batch *Batch
	rows  []uint32
}

// Rows are the selected rows' indexes, in order.
func (s Selection) Rows() []int {
	rows := make([]int, len(s.rows))
	for i, row := range s.rows {
		rows[i] = int(row)
	}
	return rows
}

// Len is how many rows are selected.
func (s Selection) Len() int { return len(s.rows) }

// SelectChangeTypes selects the rows whose change type is one of types.
func (b *Batch) SelectChangeTypes(types ...ChangeType) Selection {
	return Selection{b, b.host.SelectChangeTypes(types, nil)}
}

// SelectWhere selects the rows where `column op value` holds; value is a string, a
// bool, an integer, a float or nil. The error names an unknown column or a constant of
// the wrong type.
func (b *Batch) SelectWhere(column string, op Comparison, value any) (Selection, error) {
	return b.selectWhere(column, op, value, nil)
}

// ChangeTypes narrows the selection to rows whose change type is one of types.
func (s Selection) ChangeTypes(types ...ChangeType) Selection {
	return Selection{s.batch, s.batch.host.SelectChangeTypes(types, s.within())}
}

// Where narrows the selection to rows where `column op value` holds.
func (s Selection) Where(column string, op Comparison, value any) (Selection, error) {
	return s.batch.selectWhere(column, op, value, s.within())
}

// within is the selection as the host's `within`: never nil, as nil means every row.
func (s Selection) within() []uint32 {
	if s.rows == nil {
		return []uint32{}
	}
	return s.rows
}

func (b *Batch) selectWhere(column string, op Comparison, value any, within []uint32) (Selection, error) {
	constant, err := scalar(value)
	if err != nil {
		return Selection{}, err
	}
	rows, err := b.host.SelectWhere(abi.Predicate{Column: column, Op: op, Value: constant}, within)
	if err != nil {
		return Selection{}, err
	}
	return Selection{b, rows}, nil
}

// Comparison is how SelectWhere compares a column's value with a constant. Null is
// never equal, unequal, less or greater than anything.
type Comparison = abi.Comparison

// The comparisons; IsNull and IsNotNull ignore the constant.
const (
	Equal          = abi.Equal
	NotEqual       = abi.NotEqual
	Less           = abi.Less
	LessOrEqual    = abi.LessOrEqual
	Greater        = abi.Greater
	GreaterOrEqual = abi.GreaterOrEqual
	IsNull         = abi.IsNull
	IsNotNull      = abi.IsNotNull
)

// scalar is a Go constant as the contract's scalar.
func scalar(value any) (abi.Scalar, error) {
	switch v := value.(type) {
	case nil:
		return abi.Scalar{Kind: abi.Null}, nil
	case bool:
		return abi.Scalar{Kind: abi.Bool, Bool: v}, nil
	case string:
		return abi.Scalar{Kind: abi.String, Text: v}, nil
	case int:
		return abi.Scalar{Kind: abi.Integer, Int: int64(v)}, nil
	case int32:
		return abi.Scalar{Kind: abi.Integer, Int: int64(v)}, nil
	case int64:
		return abi.Scalar{Kind: abi.Integer, Int: v}, nil
	case float32:
		return abi.Scalar{Kind: abi.Float, Float: float64(v)}, nil
	case float64:
		return abi.Scalar{Kind: abi.Float, Float: v}, nil
	}
	return abi.Scalar{}, fmt.Errorf("a constant must be a string, bool, integer, float or nil, not %T", value)
}

// Field is where an encoded value comes from; make one with ColumnValue, Substring,
// Constant, RowChangeType, RowCommitVersion or RowCommitTimestamp.
type Field struct {
	f   abi.Field
	err error
	set bool
}

// ColumnValue is a column's value, typed as in the table (a dotted path for a struct
// field).
func ColumnValue(column string) Field {
	return Field{f: abi.Field{Kind: abi.FieldColumn, Column: column}, set: true}
}

// Substring is Spark's substring(column, pos, len): len characters from the 1-based
// character position pos, or what exists of them.
func Substring(column string, pos, len uint32) Field {
	return Field{f: abi.Field{Kind: abi.FieldSubstring, Column: column, Pos: pos, Len: len}, set: true}
}

// Constant is a constant string, bool, integer, float or nil.
func Constant(value any) Field {
	constant, err := scalar(value)
	return Field{f: abi.Field{Kind: abi.FieldConstant, Constant: constant}, err: err, set: true}
}

// RowChangeType is the row's `_change_type`, as Delta spells it.
func RowChangeType() Field { return Field{f: abi.Field{Kind: abi.FieldChangeType}, set: true} }

// RowCommitVersion is the row's `_commit_version`.
func RowCommitVersion() Field {
	return Field{f: abi.Field{Kind: abi.FieldCommitVersion}, set: true}
}

// RowCommitTimestamp is the row's `_commit_timestamp`, as ISO-8601 text.
func RowCommitTimestamp() Field {
	return Field{f: abi.Field{Kind: abi.FieldCommitTimestamp}, set: true}
}

// Named is a field of an encoded JSON object, or a header.
type Named struct {
	Name  string
	Value Field
}

// ValueEncoding is how encoded records get their values.
type ValueEncoding struct {
	kind   abi.ValueKind
	fields []Named
}

// JSONRow is a JSON object of every data column under its name, nested structs kept,
// as Spark's `to_json(struct(*))` does. It is the default.
func JSONRow() ValueEncoding { return ValueEncoding{kind: abi.ValueJSONRow} }

// JSON is a JSON object of these fields; null values are left out, as Spark's to_json
// does.
func JSON(fields ...Named) ValueEncoding {
	return ValueEncoding{kind: abi.ValueJSON, fields: append([]Named{}, fields...)}
}

// Tombstones makes every record a tombstone.
func Tombstones() ValueEncoding { return ValueEncoding{kind: abi.ValueTombstone} }

// EncodeSpec describes records the host makes natively, one per selected row, in row
// order.
type EncodeSpec struct {
	// Rows are the rows to encode, from SelectChangeTypes or SelectWhere; none when
	// zero.
	Rows Selection
	// Key is rendered as text; the zero Field (or a null value) is no key.
	Key Field
	// Value is how values are made; JSONRow when zero.
	Value ValueEncoding
	// DeleteAsTombstone makes delete rows tombstones, keeping row order.
	DeleteAsTombstone bool
	// Topic is the records' topic; the pipeline's when empty.
	Topic string
	// Headers are rendered as text; null values are left out.
	Headers []Named
}

// Encode has the host make and emit the records; it returns how many. The error names
// an unknown column or a bad constant.
func (o *Output) Encode(spec EncodeSpec) (int, error) {
	value := spec.Value
	if value.kind == abi.ValueJSON && value.fields == nil {
		value = JSONRow()
	}
	encoded := abi.EncodeSpec{
		Rows:              spec.Rows.within(),
		Value:             value.kind,
		DeleteAsTombstone: spec.DeleteAsTombstone,
	}
	if spec.Key.set {
		if spec.Key.err != nil {
			return 0, fmt.Errorf("key: %w", spec.Key.err)
		}
		encoded.Key = &spec.Key.f
	}
	var err error
	if encoded.Fields, err = named("field", value.fields); err != nil {
		return 0, err
	}
	if encoded.Headers, err = named("header", spec.Headers); err != nil {
		return 0, err
	}
	if spec.Topic != "" {
		encoded.Topic = &spec.Topic
	}
	o.flush()
	count, err := o.host.EmitEncoded(encoded)
	return int(count), err
}

// named is fields (or headers: what) in the contract's form, or the first one's error.
func named(what string, fields []Named) ([]abi.NamedField, error) {
	list := make([]abi.NamedField, len(fields))
	for i, f := range fields {
		if f.Value.err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, f.Name, f.Value.err)
		}
		list[i] = abi.NamedField{Name: f.Name, Value: f.Value.f}
	}
	return list, nil
}
