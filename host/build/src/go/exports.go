// Adapts the contract's generated Go bindings to the Sluice SDK's host interface
// (sluice.dev/sluice/abi). `sluice build` writes it beside the bindings it generates,
// as the package they expect the transformer's exports in.
package export_sluice_transform_transformer

import (
	"errors"
	"runtime/debug"

	witRuntime "go.bytecodealliance.org/pkg/wit/runtime"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"sluice.dev/sluice/abi"
	host "wit_component/sluice_transform_host"
	state "wit_component/sluice_transform_state"
	types "wit_component/sluice_transform_types"
)

// The host writes lists and strings into the module's memory through cabi_realloc, and
// the component model forbids calls out of the module meanwhile. Go's collector reads
// the clock (a WASI call) when a cycle ends, so it must not run while the host lowers
// values: it is off except while the transform's own code runs, and off again around
// the host calls that return lists.
var gcPercent = debug.SetGCPercent(-1)

// lowered runs a host call that returns values the host writes into the module's
// memory, with the collector off.
func lowered[T any](call func() T) T {
	debug.SetGCPercent(-1)
	value := call()
	// The runtime's cabi_realloc pins what it allocates until told otherwise, and the
	// bindings do not tell it after an import returns: without this, every string the
	// host ever handed over stays in memory. The lifted values reference it now.
	witRuntime.Unpin()
	debug.SetGCPercent(gcPercent)
	return value
}

func init() {
	abi.SetLogger(func(level abi.LogLevel, message string) {
		host.Log(types.LogLevel(level), message)
	})
	abi.SetState(hostState{})
}

// hostState is the pipeline's keyed state through the host.
type hostState struct{}

func (hostState) Get(key []byte) ([]byte, bool) {
	value := lowered(func() witTypes.Option[[]uint8] { return state.Get(key) })
	if value.IsNone() {
		return nil, false
	}
	return value.Some(), true
}

func (hostState) GetMany(keys [][]byte) [][]byte {
	listed := lowered(func() []witTypes.Option[[]uint8] { return state.GetMany(keys) })
	values := make([][]byte, len(listed))
	for i, value := range listed {
		if value.IsSome() {
			values[i] = value.Some()
		}
	}
	return values
}

func (hostState) Put(key, value []byte) { state.Put(key, value) }

func (hostState) Delete(key []byte) { state.Delete(key) }

func (hostState) Scan(prefix, after []byte, limit uint32) []abi.StateEntry {
	start := witTypes.None[[]uint8]()
	if after != nil {
		start = witTypes.Some(after)
	}
	listed := lowered(func() []state.Entry { return state.Scan(prefix, start, limit) })
	entries := make([]abi.StateEntry, len(listed))
	for i, entry := range listed {
		entries[i] = abi.StateEntry{Key: entry.Key, Value: entry.Value}
	}
	return entries
}

// Init runs the registered init function with the pipeline's parameters.
func Init(params []witTypes.Tuple2[string, string]) witTypes.Result[witTypes.Unit, string] {
	module := abi.Registered()
	if module == nil {
		return witTypes.Err[witTypes.Unit]("the module registered no transform: call sluice.OnBatch from an init function of its package")
	}
	debug.SetGCPercent(gcPercent)
	defer debug.SetGCPercent(-1)
	pairs := make([][2]string, len(params))
	for i, p := range params {
		pairs[i] = [2]string{p.F0, p.F1}
	}
	if err := module.Init(pairs); err != nil {
		return witTypes.Err[witTypes.Unit](err.Error())
	}
	return witTypes.Ok[witTypes.Unit, string](witTypes.Unit{})
}

// Transform runs the registered batch function on the host's batch.
func Transform(b *host.Batch) witTypes.Result[witTypes.Unit, types.TransformError] {
	// The batch is lent for this call only: dropping its handle ends the loan, which
	// the host requires before the call returns.
	defer b.Drop()
	debug.SetGCPercent(gcPercent)
	defer debug.SetGCPercent(-1)
	err := abi.Registered().Transform(&batch{b: b})
	if err == nil {
		return witTypes.Ok[witTypes.Unit, types.TransformError](witTypes.Unit{})
	}
	var row *abi.RowError
	if errors.As(err, &row) {
		return witTypes.Err[witTypes.Unit](types.MakeTransformErrorRow(types.RowError{Row: row.Row, Message: row.Message}))
	}
	return witTypes.Err[witTypes.Unit](types.MakeTransformErrorBatch(err.Error()))
}

// batch is the host's batch as abi.Batch.
type batch struct {
	b *host.Batch
}

func (b *batch) NumRows() uint32 { return b.b.NumRows() }

func (b *batch) Columns(names []string) ([]abi.Column, error) {
	result := lowered(func() witTypes.Result[[]types.Column, string] { return b.b.Columns(names) })
	if result.IsErr() {
		return nil, errors.New(result.Err())
	}
	listed := result.Ok()
	columns := make([]abi.Column, len(listed))
	for i, c := range listed {
		columns[i] = column(c)
	}
	return columns, nil
}

// column is a contract column in the SDK's form.
func column(c types.Column) abi.Column {
	v := c.Values
	col := abi.Column{Name: c.Name, Kind: abi.Kind(v.Tag())}
	switch v.Tag() {
	case types.ColumnValuesBoolean:
		col.Valid, col.Bools = values(v.Boolean(), func(b bool) bool { return b })
	case types.ColumnValuesInt32:
		col.Valid, col.Ints = values(v.Int32(), widen)
	case types.ColumnValuesDate:
		col.Valid, col.Ints = values(v.Date(), widen)
	case types.ColumnValuesInt64:
		col.Valid, col.Ints = values(v.Int64(), same)
	case types.ColumnValuesTimestamp:
		col.Valid, col.Ints = values(v.Timestamp(), same)
	case types.ColumnValuesTimestampNtz:
		col.Valid, col.Ints = values(v.TimestampNtz(), same)
	case types.ColumnValuesFloat32:
		col.Valid, col.Floats = values(v.Float32(), func(f float32) float64 { return float64(f) })
	case types.ColumnValuesFloat64:
		col.Valid, col.Floats = values(v.Float64(), func(f float64) float64 { return f })
	case types.ColumnValuesUtf8:
		col.Valid, col.Strings = values(v.Utf8(), text)
	case types.ColumnValuesDecimal:
		col.Valid, col.Strings = values(v.Decimal(), text)
	case types.ColumnValuesText:
		col.Valid, col.Strings = values(v.Text(), text)
	case types.ColumnValuesBinary:
		col.Valid, col.Bytes = values(v.Binary(), func(b []byte) []byte { return b })
	}
	return col
}

func widen(i int32) int64  { return int64(i) }
func same(i int64) int64   { return i }
func text(s string) string { return s }

// values splits optional values into validity and values.
func values[T, U any](list []witTypes.Option[T], convert func(T) U) ([]bool, []U) {
	valid := make([]bool, len(list))
	out := make([]U, len(list))
	for i, value := range list {
		if value.IsSome() {
			valid[i] = true
			out[i] = convert(value.Some())
		}
	}
	return valid, out
}

func (b *batch) ChangeTypes() []abi.ChangeType {
	listed := lowered(b.b.ChangeTypes)
	changes := make([]abi.ChangeType, len(listed))
	for i, c := range listed {
		changes[i] = abi.ChangeType(c)
	}
	return changes
}

func (b *batch) CommitVersions() []int64   { return lowered(b.b.CommitVersions) }
func (b *batch) CommitTimestamps() []int64 { return lowered(b.b.CommitTimestamps) }

// within is the host's optional row list: nil is every row.
func within(rows []uint32) witTypes.Option[[]uint32] {
	if rows == nil {
		return witTypes.None[[]uint32]()
	}
	return witTypes.Some(rows)
}

func (b *batch) SelectChangeTypes(changes []abi.ChangeType, rows []uint32) []uint32 {
	listed := make([]types.ChangeType, len(changes))
	for i, c := range changes {
		listed[i] = types.ChangeType(c)
	}
	return lowered(func() []uint32 { return b.b.SelectChangeTypes(listed, within(rows)) })
}

func (b *batch) SelectWhere(p abi.Predicate, rows []uint32) ([]uint32, error) {
	predicate := types.Predicate{Column: p.Column, Op: types.Comparison(p.Op), Value: scalar(p.Value)}
	result := lowered(func() witTypes.Result[[]uint32, string] { return b.b.SelectWhere(predicate, within(rows)) })
	if result.IsErr() {
		return nil, errors.New(result.Err())
	}
	return result.Ok(), nil
}

func scalar(s abi.Scalar) types.Scalar {
	switch s.Kind {
	case abi.Bool:
		return types.MakeScalarBoolean(s.Bool)
	case abi.Integer:
		return types.MakeScalarInteger(s.Int)
	case abi.Float:
		return types.MakeScalarFloat(s.Float)
	case abi.String:
		return types.MakeScalarText(s.Text)
	}
	return types.MakeScalarNull()
}

func field(f abi.Field) types.FieldValue {
	switch f.Kind {
	case abi.FieldColumn:
		return types.MakeFieldValueColumn(f.Column)
	case abi.FieldSubstring:
		return types.MakeFieldValueSubstring(types.Substring{Column: f.Column, Pos: f.Pos, Len: f.Len})
	case abi.FieldConstant:
		return types.MakeFieldValueConstant(scalar(f.Constant))
	case abi.FieldChangeType:
		return types.MakeFieldValueChangeType()
	case abi.FieldCommitVersion:
		return types.MakeFieldValueCommitVersion()
	}
	return types.MakeFieldValueCommitTimestamp()
}

func (b *batch) EmitEncoded(s abi.EncodeSpec) (uint32, error) {
	spec := types.EncodeSpec{
		Rows:              s.Rows,
		Key:               witTypes.None[types.FieldValue](),
		DeleteAsTombstone: s.DeleteAsTombstone,
		Topic:             witTypes.None[string](),
		Headers:           make([]witTypes.Tuple2[string, types.FieldValue], len(s.Headers)),
	}
	if s.Key != nil {
		spec.Key = witTypes.Some(field(*s.Key))
	}
	if s.Topic != nil {
		spec.Topic = witTypes.Some(*s.Topic)
	}
	for i, h := range s.Headers {
		spec.Headers[i] = witTypes.Tuple2[string, types.FieldValue]{F0: h.Name, F1: field(h.Value)}
	}
	switch s.Value {
	case abi.ValueJSON:
		fields := make([]types.JsonField, len(s.Fields))
		for i, f := range s.Fields {
			fields[i] = types.JsonField{Name: f.Name, Value: field(f.Value)}
		}
		spec.Value = types.MakeValueEncodingJson(fields)
	case abi.ValueJSONRow:
		spec.Value = types.MakeValueEncodingJsonRow()
	default:
		spec.Value = types.MakeValueEncodingTombstone()
	}
	result := lowered(func() witTypes.Result[uint32, string] { return b.b.EmitEncoded(spec) })
	if result.IsErr() {
		return 0, errors.New(result.Err())
	}
	return result.Ok(), nil
}

func (b *batch) EmitPacked(records abi.PackedRecords) {
	b.b.EmitPacked(types.PackedRecords(records))
}

func own(s *abi.OwnSchema) witTypes.Option[types.OwnSchema] {
	if s == nil {
		return witTypes.None[types.OwnSchema]()
	}
	schema := types.OwnSchema{Kind: types.SchemaKind(s.Kind), Text: s.Text, Name: witTypes.None[string]()}
	if s.Name != nil {
		schema.Name = witTypes.Some(*s.Name)
	}
	return witTypes.Some(schema)
}

func (b *batch) EmitFramed(records abi.PackedRecords, f abi.Framing) {
	b.b.EmitFramed(types.PackedRecords(records), types.Framing{Key: own(f.Key), Value: own(f.Value)})
}

func (b *batch) Reject(row uint32, message string) { b.b.Reject(row, message) }
