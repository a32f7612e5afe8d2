package abi

import (
	"bytes"
	"slices"
	"strings"
)

// StateEntry is a key of the pipeline's keyed state and its value.
type StateEntry struct {
	Key, Value []byte
}

// State is the pipeline's keyed state: the host's in a component, a map in memory
// otherwise.
type State interface {
	// Get returns the value under key and whether there is one.
	Get(key []byte) ([]byte, bool)
	// GetMany returns the values under keys, nil where there is none.
	GetMany(keys [][]byte) [][]byte
	Put(key, value []byte)
	Delete(key []byte)
	// Scan returns up to limit entries whose keys start with prefix, in byte order of
	// their keys, after after when it is not nil.
	Scan(prefix, after []byte, limit uint32) []StateEntry
}

var state State = NewMemoryState()

// SetState sets the state the SDK uses: the host's in a component, a fresh memory
// state in unit tests.
func SetState(s State) { state = s }

// CurrentState is the state the SDK uses.
func CurrentState() State { return state }

// MemoryState is keyed state in a map, for unit tests.
type MemoryState struct {
	entries map[string][]byte
}

// NewMemoryState is an empty memory state.
func NewMemoryState() *MemoryState {
	return &MemoryState{entries: map[string][]byte{}}
}

// Get returns the value under key and whether there is one.
func (m *MemoryState) Get(key []byte) ([]byte, bool) {
	value, ok := m.entries[string(key)]
	return value, ok
}

// GetMany returns the values under keys, nil where there is none.
func (m *MemoryState) GetMany(keys [][]byte) [][]byte {
	values := make([][]byte, len(keys))
	for i, key := range keys {
		values[i] = m.entries[string(key)]
	}
	return values
}

// Put sets the value under key.
func (m *MemoryState) Put(key, value []byte) {
	m.entries[string(key)] = bytes.Clone(value)
}

// Delete removes key.
func (m *MemoryState) Delete(key []byte) {
	delete(m.entries, string(key))
}

// Scan returns up to limit entries whose keys start with prefix, after after.
func (m *MemoryState) Scan(prefix, after []byte, limit uint32) []StateEntry {
	var keys []string
	for key := range m.entries {
		if strings.HasPrefix(key, string(prefix)) && (after == nil || key > string(after)) {
			keys = append(keys, key)
		}
	}
	// Go compares strings by their bytes: byte order of keys.
	slices.Sort(keys)
	if uint32(len(keys)) > limit {
		keys = keys[:limit]
	}
	found := make([]StateEntry, len(keys))
	for i, key := range keys {
		found[i] = StateEntry{Key: []byte(key), Value: m.entries[key]}
	}
	return found
}
