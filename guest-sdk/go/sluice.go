// Package sluice is the Go SDK for Sluice transforms: a module that reads batches of a
// Delta table's change rows and emits Kafka records.
//
// A transform registers its functions from an init function (a module's main never
// runs):
//
//	func init() {
//		sluice.OnInit(func(params sluice.Params) error { ... })
//		sluice.OnBatch(func(batch *sluice.Batch, out *sluice.Output) error { ... })
//	}
//
// `sluice build` generates the contract's bindings, compiles the package with Go for
// wasip1 and makes the component; package sluicetest runs a transform natively in unit
// tests.
package sluice

import (
	"errors"
	"fmt"

	"sluice.dev/sluice/abi"
)

// Params are the pipeline's `[transform.params]`.
type Params map[string]string

// Get returns the parameter called name, or fallback when it is not set.
func (p Params) Get(name, fallback string) string {
	if value, ok := p[name]; ok {
		return value
	}
	return fallback
}

// ChangeType is what happened to a row, as Delta's `_change_type` says.
type ChangeType = abi.ChangeType

// The change types.
const (
	Insert          = abi.Insert
	UpdatePreimage  = abi.UpdatePreimage
	UpdatePostimage = abi.UpdatePostimage
	Delete          = abi.Delete
)

// ParseChangeType reads a change type as Delta spells it (`update_postimage`); its
// String method spells it back.
func ParseChangeType(name string) (ChangeType, bool) {
	return abi.ParseChangeType(name)
}

// RowError fails one row: the batch's records are discarded and the pipeline's error
// policy decides. Return it from a batch function (FailRow makes one); any other error
// fails the whole batch.
type RowError = abi.RowError

// FailRow is an error that fails row, with why.
func FailRow(row int, format string, args ...any) error {
	return &RowError{Row: uint32(row), Message: fmt.Sprintf(format, args...)}
}

// LogLevel is how loud a log message is.
type LogLevel = abi.LogLevel

// The log levels.
const (
	LevelTrace = abi.LevelTrace
	LevelDebug = abi.LevelDebug
	LevelInfo  = abi.LevelInfo
	LevelWarn  = abi.LevelWarn
	LevelError = abi.LevelError
)

// Logf writes to the pipeline's log, attributed to the module. The host rate-limits it.
func Logf(level LogLevel, format string, args ...any) {
	abi.Log(level, fmt.Sprintf(format, args...))
}

// OnInit registers what runs once per instance, before the first batch, with the
// pipeline's parameters. An error stops the pipeline with its message.
func OnInit(init func(Params) error) {
	module.init = init
	abi.Register(&module)
}

// OnBatch registers the transform: called once per batch, it reads the batch and emits
// records to out. Call it from an init function.
func OnBatch(transform func(*Batch, *Output) error) {
	module.transform = transform
	abi.Register(&module)
}

// registration is the registered functions, as the host calls them.
type registration struct {
	init      func(Params) error
	transform func(*Batch, *Output) error
}

var module registration

func (r *registration) Init(params [][2]string) error {
	if r.transform == nil {
		return errors.New("the module registered no transform: call sluice.OnBatch from an init function")
	}
	if r.init == nil {
		return nil
	}
	values := make(Params, len(params))
	for _, p := range params {
		values[p[0]] = p[1]
	}
	return r.init(values)
}

func (r *registration) Transform(host abi.Batch) error {
	out := &Output{host: host}
	err := r.transform(&Batch{host: host}, out)
	// On an error the host discards the batch's records; they are handed over all the
	// same, so unit tests see what was emitted before it.
	out.flush()
	return err
}
