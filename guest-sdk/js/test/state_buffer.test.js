// The module's state backend buffers a batch's calls: tested against a host that
// counts its calls and keeps entries as the real one does.
import assert from 'node:assert/strict';
import test from 'node:test';

import { BufferedState, FLUSH_BYTES } from '../src/state_buffer.js';

const bytes = (text) => new TextEncoder().encode(text);
const text = (value) => (value == null ? null : new TextDecoder().decode(value));

/** A host keeping entries in a Map, counting each call. */
function countingHost() {
  const entries = new Map();
  const calls = [];
  return {
    entries,
    calls,
    get(key) {
      calls.push(['get', text(key)]);
      return entries.get(text(key)) ?? undefined;
    },
    getMany(keys) {
      calls.push(['getMany', keys.map(text)]);
      return keys.map((key) => entries.get(text(key)) ?? undefined);
    },
    put(key, value) {
      calls.push(['put', text(key)]);
      entries.set(text(key), value.slice());
    },
    delete(key) {
      calls.push(['delete', text(key)]);
      entries.delete(text(key));
    },
    scan(prefix, after, limit) {
      calls.push(['scan', text(prefix)]);
      return [...entries.keys()]
        .sort()
        .filter((key) => key.startsWith(text(prefix)) && (after === undefined || key > text(after)))
        .slice(0, limit)
        .map((key) => ({ key: bytes(key), value: entries.get(key) }));
    },
  };
}

test('a batch reads each key from the host once and sends its last write at the end', () => {
  const host = countingHost();
  host.entries.set('open/acme', bytes('1'));
  const state = new BufferedState(host);
  state.begin();
  for (let i = 2; i <= 5; i++) {
    assert.equal(text(state.get(bytes('open/acme'))), String(i - 1));
    state.put(bytes('open/acme'), bytes(String(i)));
  }
  state.delete(bytes('absent'));
  assert.equal(state.get(bytes('absent')), null);
  assert.deepEqual(host.calls, [['get', 'open/acme']], 'nothing written before the batch ends');
  state.commit();
  assert.deepEqual(host.calls.slice(1), [['put', 'open/acme'], ['delete', 'absent']]);
  assert.equal(text(host.entries.get('open/acme')), '5');
  // The next batch reads from the host again: what it knows belongs to one batch.
  state.begin();
  assert.equal(text(state.get(bytes('open/acme'))), '5');
  assert.equal(host.calls.length, 4);
});

test('a failed batch sends nothing, and a caller reusing its buffers changes nothing sent', () => {
  const host = countingHost();
  const state = new BufferedState(host);
  state.begin();
  state.put(bytes('a'), bytes('1'));
  state.discard();
  assert.deepEqual(host.calls, []);
  state.begin();
  const buffer = bytes('x');
  state.put(bytes('a'), buffer);
  buffer[0] = 'y'.charCodeAt(0);
  state.commit();
  assert.equal(text(host.entries.get('a')), 'x');
});

test('get-many asks the host only for keys the batch does not know, once each', () => {
  const host = countingHost();
  host.entries.set('b', bytes('2'));
  const state = new BufferedState(host);
  state.begin();
  state.put(bytes('a'), bytes('1'));
  const values = state.getMany([bytes('a'), bytes('b'), bytes('c'), bytes('b')]);
  assert.deepEqual(values.map(text), ['1', '2', null, '2']);
  assert.deepEqual(host.calls, [['getMany', ['b', 'c']]]);
});

test('a scan sends the batch writes first, and outside a batch every call goes to the host', () => {
  const host = countingHost();
  const state = new BufferedState(host);
  state.begin();
  state.put(bytes('deal/1'), bytes('acme'));
  const page = state.scan(bytes('deal/'), null, 10);
  assert.deepEqual(page.map((e) => text(e.key)), ['deal/1']);
  state.commit();
  assert.deepEqual(host.calls, [['put', 'deal/1'], ['scan', 'deal/']]);
  state.put(bytes('k'), bytes('v'));
  assert.equal(state.get(bytes('k')).length, 1);
  assert.deepEqual(host.calls.slice(2), [['put', 'k'], ['get', 'k']]);
});

test('a value read can be changed by the caller without changing the batch', () => {
  const host = countingHost();
  host.entries.set('a', bytes('1'));
  const state = new BufferedState(host);
  state.begin();
  state.get(bytes('a'))[0] = '9'.charCodeAt(0);
  state.put(bytes('b'), bytes('2'));
  state.getMany([bytes('b')])[0][0] = '9'.charCodeAt(0);
  assert.deepEqual([state.get(bytes('a')), state.get(bytes('b'))].map(text), ['1', '2']);
  state.commit();
  assert.equal(text(host.entries.get('b')), '2');
});

test('writes past FLUSH_BYTES reach the host during the batch, so its limits apply', () => {
  const host = countingHost();
  const state = new BufferedState(host);
  state.begin();
  const value = new Uint8Array(64 * 1024);
  // The last of these puts takes the buffer past FLUSH_BYTES (keys count too).
  const puts = FLUSH_BYTES / value.length;
  for (let i = 0; i < puts; i++) state.put(bytes(`hoard/${i}`), value);
  assert.equal(host.entries.size, puts, 'sent before the batch ends');
  assert.equal(state.pendingBytes, 0);
  state.put(bytes('last'), bytes('1'));
  assert.equal(host.entries.size, puts);
  state.commit();
  assert.equal(host.entries.size, puts + 1);
});
