// Package abi is the seam between the Sluice SDK and the contract's generated
// bindings: the host's batch as a Go interface, and the plain data that crosses it.
//
// `sluice build` adapts the bindings it generates to this package; package sluicetest
// puts an in-memory host behind it for unit tests. Transforms use package sluice, never
// this one.
package abi

import "fmt"

// ChangeType is what happened to a row, in the contract's order.
type ChangeType uint8

// The change types, as the contract numbers them.
const (
	Insert ChangeType = iota
	UpdatePreimage
	UpdatePostimage
	Delete
)

var changeTypeNames = [...]string{"insert", "update_preimage", "update_postimage", "delete"}

// String is the change type as Delta spells it (`update_postimage`).
func (c ChangeType) String() string {
	if int(c) < len(changeTypeNames) {
		return changeTypeNames[c]
	}
	return fmt.Sprintf("change type %d", uint8(c))
}

// ParseChangeType reads a change type as Delta spells it.
func ParseChangeType(name string) (ChangeType, bool) {
	for i, known := range changeTypeNames {
		if name == known {
			return ChangeType(i), true
		}
	}
	return 0, false
}

// Kind is a column's type, in the order of the contract's column-values variant.
type Kind uint8

// The column kinds, as the contract numbers them.
const (
	Boolean Kind = iota
	Int32
	Int64
	Float32
	Float64
	Utf8
	Binary
	Date
	Timestamp
	TimestampNtz
	Decimal
	Text
)

// Column is one data column of a batch. Valid says which rows hold a value; of the
// value slices only the one for Kind is set: Bools (Boolean), Ints (Int32, Int64, Date,
// Timestamp, TimestampNtz), Floats (Float32, Float64), Strings (Utf8, Decimal, Text) or
// Bytes (Binary).
type Column struct {
	Name    string
	Kind    Kind
	Valid   []bool
	Bools   []bool
	Ints    []int64
	Floats  []float64
	Strings []string
	Bytes   [][]byte
}

// ScalarKind tells which field of a Scalar holds its value.
type ScalarKind uint8

// The scalar kinds, as the contract numbers them.
const (
	Null ScalarKind = iota
	Bool
	Integer
	Float
	String
)

// Scalar is a constant in a predicate or an encoded field.
type Scalar struct {
	Kind  ScalarKind
	Bool  bool
	Int   int64
	Float float64
	Text  string
}

// Comparison is how a predicate compares, as the contract numbers them.
type Comparison uint8

// The comparisons.
const (
	Equal Comparison = iota
	NotEqual
	Less
	LessOrEqual
	Greater
	GreaterOrEqual
	IsNull
	IsNotNull
)

// Predicate is a condition on one column.
type Predicate struct {
	Column string
	Op     Comparison
	Value  Scalar
}

// FieldKind tells where an encoded field's value comes from, as the contract numbers
// them.
type FieldKind uint8

// The field kinds.
const (
	FieldColumn FieldKind = iota
	FieldSubstring
	FieldConstant
	FieldChangeType
	FieldCommitVersion
	FieldCommitTimestamp
)

// Field is where an encoded value comes from: a column (Column), a substring of one
// (Column, Pos, Len), a constant (Constant) or a change column.
type Field struct {
	Kind     FieldKind
	Column   string
	Pos, Len uint32
	Constant Scalar
}

// NamedField is a field of an encoded JSON object, or a header.
type NamedField struct {
	Name  string
	Value Field
}

// ValueKind is how encoded records get their values, as the contract numbers them.
type ValueKind uint8

// The value encodings.
const (
	ValueJSON ValueKind = iota
	ValueJSONRow
	ValueTombstone
)

// EncodeSpec is the records the host makes, one per selected row.
type EncodeSpec struct {
	Rows              []uint32
	Key               *Field
	Value             ValueKind
	Fields            []NamedField
	DeleteAsTombstone bool
	Topic             *string
	Headers           []NamedField
}

// PackedRecords is many records in the contract's flat form (see its packed-records).
type PackedRecords struct {
	Data               []byte
	SourceRows         []uint32
	KeyLengths         []int32
	ValueLengths       []int32
	Topics             []string
	TopicIndexes       []uint32
	Partitions         []int32
	HeaderNames        []string
	HeaderCounts       []uint32
	HeaderNameIndexes  []uint32
	HeaderValueLengths []uint32
}

// SchemaKind is the kind of a module's own schema, as the contract numbers them.
type SchemaKind uint8

// The schema kinds.
const (
	Avro SchemaKind = iota
	JSONSchema
	Protobuf
)

// OwnSchema is a schema a module encoded keys or values with itself.
type OwnSchema struct {
	Kind SchemaKind
	Text string
	Name *string
}

// Framing is what the host frames: keys, values or both, each with its schema.
type Framing struct {
	Key, Value *OwnSchema
}

// Batch is the host's batch, valid during one Transform call.
type Batch interface {
	NumRows() uint32
	// Columns returns the named data columns, all of them when names is empty.
	Columns(names []string) ([]Column, error)
	ChangeTypes() []ChangeType
	CommitVersions() []int64
	CommitTimestamps() []int64
	// SelectChangeTypes returns the rows of within (all rows when nil) with one of types.
	SelectChangeTypes(types []ChangeType, within []uint32) []uint32
	// SelectWhere returns the rows of within (all rows when nil) where p holds.
	SelectWhere(p Predicate, within []uint32) ([]uint32, error)
	EmitEncoded(spec EncodeSpec) (uint32, error)
	EmitPacked(records PackedRecords)
	EmitFramed(records PackedRecords, framing Framing)
	Reject(row uint32, message string)
}

// RowError fails one row of a batch: the batch's records are discarded and the
// pipeline's error policy decides.
type RowError struct {
	Row     uint32
	Message string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("row %d: %s", e.Row, e.Message)
}

// Module is what the host calls: once per instance, then once per batch. A *RowError
// from Transform fails the row; any other error fails the batch.
type Module interface {
	Init(params [][2]string) error
	Transform(batch Batch) error
}

// LogLevel is how loud a log message is, as the contract numbers them.
type LogLevel uint8

// The log levels.
const (
	LevelTrace LogLevel = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

var (
	registered Module
	logger     = func(LogLevel, string) {}
)

// Register makes m the module the host calls; package sluice calls it.
func Register(m Module) { registered = m }

// Registered is the module the host calls, nil when none registered.
func Registered() Module { return registered }

// SetLogger sets where Log writes: the host's log in a component, a test's buffer in
// unit tests.
func SetLogger(log func(LogLevel, string)) { logger = log }

// Log writes a message to the pipeline's log.
func Log(level LogLevel, message string) { logger(level, message) }
