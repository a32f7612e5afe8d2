package sluice

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"sluice.dev/sluice/abi"
)

// StateEntry is a key of the pipeline's keyed state and its value.
type StateEntry = abi.StateEntry

// statePage is how many entries Entries asks for at a time.
const statePage = 256

// KeyedState is the pipeline's keyed state (contract 1.2; the pipeline needs a
// `[state]` section): values by key, kept across batches and committed exactly once
// with the batch's records. Keys and values are bytes; text, integers, floats and JSON
// are stored as UTF-8 text, as every SDK stores them, so `sluice state` shows them and
// a module in another language reads them. Use it through State.
type KeyedState struct{}

// State is the pipeline's keyed state. In unit tests it is a map in memory that
// sluicetest.ClearState empties.
var State KeyedState

// Get returns the value under key and whether there is one.
func (KeyedState) Get(key []byte) ([]byte, bool) { return abi.CurrentState().Get(key) }

// GetMany returns the values under keys in one host call, nil where there is none.
func (KeyedState) GetMany(keys [][]byte) [][]byte { return abi.CurrentState().GetMany(keys) }

// Put sets the value under key.
func (KeyedState) Put(key, value []byte) { abi.CurrentState().Put(key, value) }

// Delete removes key; removing an absent key does nothing.
func (KeyedState) Delete(key []byte) { abi.CurrentState().Delete(key) }

// Scan returns up to limit entries whose keys start with prefix, in byte order of
// their keys, after after when it is not nil. Fewer than limit means there are no more.
func (KeyedState) Scan(prefix, after []byte, limit uint32) []StateEntry {
	return abi.CurrentState().Scan(prefix, after, limit)
}

// Entries returns every entry whose key starts with prefix, in byte order of keys.
func (s KeyedState) Entries(prefix []byte) []StateEntry {
	var all []StateEntry
	var after []byte
	for {
		page := s.Scan(prefix, after, statePage)
		all = append(all, page...)
		if len(page) < statePage {
			return all
		}
		after = page[len(page)-1].Key
	}
}

// GetString returns the text under key; false when absent or not UTF-8.
func (s KeyedState) GetString(key string) (string, bool) {
	value, ok := s.Get([]byte(key))
	if !ok || !utf8.Valid(value) {
		return "", false
	}
	return string(value), true
}

// PutString sets key to value.
func (s KeyedState) PutString(key, value string) { s.Put([]byte(key), []byte(value)) }

// DeleteKey removes the text key.
func (s KeyedState) DeleteKey(key string) { s.Delete([]byte(key)) }

// GetInt returns the integer under key (stored as decimal text); false when absent or
// not one.
func (s KeyedState) GetInt(key string) (int64, bool) {
	text, ok := s.GetString(key)
	if !ok {
		return 0, false
	}
	value, err := strconv.ParseInt(text, 10, 64)
	return value, err == nil
}

// PutInt sets key to value, as decimal text.
func (s KeyedState) PutInt(key string, value int64) {
	s.PutString(key, strconv.FormatInt(value, 10))
}

// Add adds delta to the counter under key (absent counts as 0) and returns the new
// value; a counter that reaches 0 is removed.
func (s KeyedState) Add(key string, delta int64) int64 {
	value, _ := s.GetInt(key)
	value += delta
	if value == 0 {
		s.DeleteKey(key)
	} else {
		s.PutInt(key, value)
	}
	return value
}

// GetFloat returns the number under key (stored as text); false when absent or not one.
func (s KeyedState) GetFloat(key string) (float64, bool) {
	text, ok := s.GetString(key)
	if !ok {
		return 0, false
	}
	value, err := strconv.ParseFloat(text, 64)
	return value, err == nil
}

// PutFloat sets key to value, as text that reads back to the same number.
func (s KeyedState) PutFloat(key string, value float64) {
	s.PutString(key, strconv.FormatFloat(value, 'g', -1, 64))
}

// GetJSON reads the JSON under key into v; false when absent.
func (s KeyedState) GetJSON(key string, v any) (bool, error) {
	value, ok := s.Get([]byte(key))
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(value, v)
}

// PutJSON sets key to v as JSON.
func (s KeyedState) PutJSON(key string, v any) error {
	value, err := json.Marshal(v)
	if err == nil {
		s.Put([]byte(key), value)
	}
	return err
}
