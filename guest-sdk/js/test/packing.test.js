// Packing records and the plain values, in Node (no host needed).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runInNewContext } from 'node:vm';

import { ChangeType, Params, constant, json, rowIndexes } from '../src/model.js';
import { Packer } from '../src/packing.js';

const text = (bytes) => new TextDecoder().decode(bytes);

test('keys, values and tombstones share one buffer', () => {
  const packer = new Packer();
  packer.add(0, { key: 'k1', value: new TextEncoder().encode('v1') });
  packer.add(3, { key: 'k2' });
  packer.add(4, { value: 'only' });
  const packed = packer.packed();
  assert.equal(text(packed.data), 'k1v1k2only');
  assert.deepEqual([...packed.sourceRows], [0, 3, 4]);
  assert.deepEqual([...packed.keyLengths], [2, 2, -1]);
  assert.deepEqual([...packed.valueLengths], [2, -1, 4]);
  assert.equal(packed.topicIndexes.length + packed.partitions.length + packed.headerCounts.length, 0);
});

test('topics, partitions and headers are indexed', () => {
  const packer = new Packer();
  packer.add(0, { value: 'a', topic: 't1', headers: [['h', 'x'], ['g', 'yz']] });
  packer.add(1, { value: 'b', partition: 2, headers: { h: 'w' } });
  packer.add(2, { value: 'c', topic: 't1' });
  const packed = packer.packed();
  assert.equal(text(packed.data), 'axyzbwc');
  assert.deepEqual(packed.topics, ['t1']);
  assert.deepEqual([...packed.topicIndexes], [1, 0, 1]);
  assert.deepEqual([...packed.partitions], [-1, 2, -1]);
  assert.deepEqual(packed.headerNames, ['h', 'g']);
  assert.deepEqual([...packed.headerCounts], [2, 1, 0]);
  assert.deepEqual([...packed.headerNameIndexes], [0, 1, 0]);
  assert.deepEqual([...packed.headerValueLengths], [1, 2, 1]);
});

test('change types, params and fields', () => {
  assert.equal(ChangeType.parse(' update_postimage'), 'update_postimage');
  assert.throws(() => ChangeType.parse('upsert'), /Unknown change type `upsert`/);
  const params = new Params([['a', '1']]);
  assert.equal(params.get('a'), '1');
  assert.equal(params.get('b', 'x'), 'x');
  assert.throws(() => params.require('b'), /Parameter b is required/);
  assert.deepEqual(json({ id: { tag: 'column', val: 'id' } }).val, [{ name: 'id', value: { tag: 'column', val: 'id' } }]);
  assert.deepEqual(constant(3).val, { tag: 'integer', val: 3n });
  assert.deepEqual(constant(1.5).val, { tag: 'float', val: 1.5 });
  assert.throws(() => constant([1]), TypeError);
});

test('a bad record is refused and leaves the packer as it was', () => {
  const packer = new Packer();
  packer.add(0, { key: 'k', value: 'v' });
  assert.throws(() => packer.add(1, { key: 'k2', value: 7 }), TypeError);
  assert.throws(() => packer.add(1, { key: 'k2', value: 'v', headers: { h: 1 } }), TypeError);
  const packed = packer.packed();
  assert.equal(text(packed.data), 'kv');
  assert.deepEqual([...packed.sourceRows], [0]);
  assert.deepEqual([...packed.keyLengths], [1]);
});

// Inside a module the bindings make typed arrays in a realm of their own; node:vm's
// contexts are such realms.
test('byte arrays from another realm are keys and values as they are', () => {
  const bytes = runInNewContext('new Uint8Array([104, 105])');
  assert.equal(bytes instanceof Uint8Array, false);
  const packer = new Packer();
  packer.add(0, { key: bytes, value: bytes });
  assert.equal(text(packer.packed().data), 'hihi');
});

test('row indexes from another realm pass through without a copy', () => {
  const rows = runInNewContext('new Uint32Array([2, 5, 7])');
  assert.equal(rowIndexes(rows), rows);
  const converted = rowIndexes([2, 5, 7]);
  assert.ok(converted instanceof Uint32Array);
  assert.deepEqual([...converted], [2, 5, 7]);
  assert.deepEqual([...rowIndexes(runInNewContext('new Int32Array([1, 2])'))], [1, 2]);
});
