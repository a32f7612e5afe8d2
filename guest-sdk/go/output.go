package sluice

import "sluice.dev/sluice/abi"

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a record to emit. Zero fields take the defaults: a nil Key is no key, a nil
// Value a tombstone, an empty Topic the pipeline's topic, a nil Partition Kafka's
// partitioner.
type Record struct {
	Key       []byte
	Value     []byte
	Topic     string
	Partition *int32
	Headers   []Header
}

// Partition is a partition for Record.Partition.
func Partition(p int32) *int32 { return &p }

// SchemaKind is the kind of a schema a module encodes its own bytes with.
type SchemaKind = abi.SchemaKind

// The schema kinds.
const (
	SchemaAvro       = abi.Avro
	SchemaJSON       = abi.JSONSchema
	SchemaProtobuf   = abi.Protobuf
	flushAtDataBytes = 1 << 20
)

// OwnSchema is a schema the module encoded keys or values with itself.
type OwnSchema struct {
	Kind SchemaKind
	// Text is the schema as registered: Avro's JSON, a JSON Schema, a `.proto` file.
	Text string
	// Name is the Protobuf message's full name (the file's first message when empty),
	// or for Avro and JSON Schema the record name record-name subjects use when the
	// schema names none.
	Name string
}

// AvroSchema is an Avro schema's JSON text.
func AvroSchema(text string) *OwnSchema { return &OwnSchema{Kind: SchemaAvro, Text: text} }

// JSONSchema is a JSON Schema's text; the bytes it frames are JSON.
func JSONSchema(text string) *OwnSchema { return &OwnSchema{Kind: SchemaJSON, Text: text} }

// ProtobufSchema is a `.proto` file's text and the full name of the message the bytes
// hold (the file's first message when empty).
func ProtobufSchema(text, message string) *OwnSchema {
	return &OwnSchema{Kind: SchemaProtobuf, Text: text, Name: message}
}

// Framing is what EmitFramed frames: keys, values or both, each with its schema; nil
// leaves them as they are.
type Framing struct {
	Key, Value *OwnSchema
}

// Output is where a transform puts its records, in order. It is valid during the batch
// function it is passed to.
type Output struct {
	host    abi.Batch
	packer  packer
	framing abi.Framing
}

// Emit emits record, made from the batch's row. Its bytes are copied.
func (o *Output) Emit(row int, record Record) {
	o.switchTo(nil)
	o.packer.add(uint32(row), &record)
	o.flushIfLarge()
}

// EmitKV emits a record with only a key and a value (nil for no key, or a tombstone).
func (o *Output) EmitKV(row int, key, value []byte) {
	o.Emit(row, Record{Key: key, Value: value})
}

// EmitFramed emits record (contract 1.1), whose key or value the module encoded with
// framing's schemas: the host registers them in the pipeline's schema registry, checks
// the bytes decode with them and writes Confluent's wire format header before them.
// Records cross to the host in runs of one framing: make the framing once and reuse it.
func (o *Output) EmitFramed(row int, framing *Framing, record Record) {
	o.switchTo(framing)
	o.packer.add(uint32(row), &record)
	o.flushIfLarge()
}

// Reject marks a row as failed, with why; the transform carries on with the others.
// The pipeline's error policy decides what happens to it.
func (o *Output) Reject(row int, message string) {
	o.flush()
	o.host.Reject(uint32(row), message)
}

// switchTo flushes records of another framing, so that records keep their order. A
// framing is compared by its schemas' contents, copied only when they change: changing
// a Framing after emitting with it does not change what was emitted.
func (o *Output) switchTo(framing *Framing) {
	var key, value *OwnSchema
	if framing != nil {
		key, value = framing.Key, framing.Value
	}
	if holds(o.framing.Key, key) && holds(o.framing.Value, value) {
		return
	}
	o.flush()
	o.framing = abi.Framing{Key: own(key), Value: own(value)}
}

// holds says whether the copy held is schema s.
func holds(held *abi.OwnSchema, s *OwnSchema) bool {
	if held == nil || s == nil {
		return held == nil && s == nil
	}
	name := ""
	if held.Name != nil {
		name = *held.Name
	}
	return held.Kind == s.Kind && held.Text == s.Text && name == s.Name
}

func (o *Output) flushIfLarge() {
	if len(o.packer.records.Data) >= flushAtDataBytes {
		o.flush()
	}
}

// flush hands the packed records to the host.
func (o *Output) flush() {
	if len(o.packer.records.SourceRows) == 0 {
		return
	}
	records := o.packer.take()
	if o.framing.Key == nil && o.framing.Value == nil {
		o.host.EmitPacked(records)
		return
	}
	o.host.EmitFramed(records, o.framing)
}

func own(s *OwnSchema) *abi.OwnSchema {
	if s == nil {
		return nil
	}
	schema := &abi.OwnSchema{Kind: s.Kind, Text: s.Text}
	if s.Name != "" {
		schema.Name = &s.Name
	}
	return schema
}

// packer builds the contract's packed records. The optional per-record lists stay
// empty until a record needs them, then are filled in for the records before it.
type packer struct {
	records abi.PackedRecords
	topics  map[string]uint32
	names   map[string]uint32
}

func (p *packer) add(row uint32, r *Record) {
	rec := &p.records
	n := len(rec.SourceRows)
	rec.SourceRows = append(rec.SourceRows, row)
	rec.KeyLengths = append(rec.KeyLengths, appendOptional(&rec.Data, r.Key))
	rec.ValueLengths = append(rec.ValueLengths, appendOptional(&rec.Data, r.Value))
	if r.Topic != "" || len(rec.TopicIndexes) > 0 {
		rec.TopicIndexes = backfill(rec.TopicIndexes, n, 0)
		rec.TopicIndexes = append(rec.TopicIndexes, p.topicIndex(r.Topic))
	}
	if r.Partition != nil || len(rec.Partitions) > 0 {
		rec.Partitions = backfill(rec.Partitions, n, -1)
		partition := int32(-1)
		if r.Partition != nil {
			partition = *r.Partition
		}
		rec.Partitions = append(rec.Partitions, partition)
	}
	if len(r.Headers) > 0 || len(rec.HeaderCounts) > 0 {
		rec.HeaderCounts = backfill(rec.HeaderCounts, n, 0)
		rec.HeaderCounts = append(rec.HeaderCounts, uint32(len(r.Headers)))
		for _, h := range r.Headers {
			rec.HeaderNameIndexes = append(rec.HeaderNameIndexes, p.nameIndex(h.Key))
			rec.HeaderValueLengths = append(rec.HeaderValueLengths, uint32(len(h.Value)))
			rec.Data = append(rec.Data, h.Value...)
		}
	}
}

// appendOptional appends bytes to data and returns their length, or -1 for nil.
func appendOptional(data *[]byte, bytes []byte) int32 {
	if bytes == nil {
		return -1
	}
	*data = append(*data, bytes...)
	return int32(len(bytes))
}

// backfill pads list with fill until it has n entries.
func backfill[T any](list []T, n int, fill T) []T {
	for len(list) < n {
		list = append(list, fill)
	}
	return list
}

// topicIndex is 0 for the pipeline's topic, i for Topics[i-1].
func (p *packer) topicIndex(topic string) uint32 {
	if topic == "" {
		return 0
	}
	if i, ok := p.topics[topic]; ok {
		return i
	}
	if p.topics == nil {
		p.topics = map[string]uint32{}
	}
	p.records.Topics = append(p.records.Topics, topic)
	p.topics[topic] = uint32(len(p.records.Topics))
	return p.topics[topic]
}

func (p *packer) nameIndex(name string) uint32 {
	if i, ok := p.names[name]; ok {
		return i
	}
	if p.names == nil {
		p.names = map[string]uint32{}
	}
	p.names[name] = uint32(len(p.records.HeaderNames))
	p.records.HeaderNames = append(p.records.HeaderNames, name)
	return p.names[name]
}

// take returns the records packed so far and starts afresh.
func (p *packer) take() abi.PackedRecords {
	records := p.records
	*p = packer{}
	return records
}
