// The state helpers against the conformance suite (guest-sdk/conformance/state.json),
// in the memory state Node's entry gives transforms' tests.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { state } from '@sluice/transform';
import { memoryState } from '../src/state.js';

const suite = JSON.parse(readFileSync(new URL('../../conformance/state.json', import.meta.url)));

const asBytes = (value) =>
  typeof value === 'string' ? new TextEncoder().encode(value) : Uint8Array.from(Buffer.from(value.hex, 'hex'));
const hex = (bytes) => Buffer.from(bytes).toString('hex');
const sameBytes = (value) => (value === null ? null : hex(asBytes(value)));
const shown = (bytes) => (bytes == null ? null : hex(bytes));

/** What a step gives, in the suite's terms. */
function step(s, [op, args]) {
  const [key] = args;
  switch (op) {
    case 'put':
      return s.put(asBytes(key), asBytes(args[1]));
    case 'put_str':
      return s.putStr(asBytes(key), args[1]);
    case 'put_number':
      return s.putNumber(asBytes(key), args[1]);
    case 'add':
      return s.add(asBytes(key), args[1]);
    case 'delete':
      return s.delete(asBytes(key));
    case 'get':
      return shown(s.get(asBytes(key)));
    case 'get_str':
      return s.getStr(asBytes(key));
    case 'get_number':
      return s.getNumber(asBytes(key));
    case 'get_many':
      return s.getMany(key.map(asBytes)).map(shown);
    case 'scan':
      return s
        .scan(asBytes(key), { after: args[1] === null ? null : asBytes(args[1]), limit: args[2] })
        .map(({ key: k, value }) => [hex(k), hex(value)]);
    default:
      throw new Error(`unknown step ${op}`);
  }
}

/** What the suite says a step returns, in the terms `step` gives. */
function expected([op], returns) {
  switch (op) {
    case 'get':
      return sameBytes(returns);
    case 'get_many':
      return returns.map(sameBytes);
    case 'scan':
      return returns.map(([k, v]) => [sameBytes(k), sameBytes(v)]);
    default:
      return returns;
  }
}

/** Names of the cases `makeState` gets wrong, with what went wrong. */
function failures(makeState) {
  const failed = [];
  for (const { name, steps, state: after } of suite.cases) {
    const s = makeState();
    try {
      for (const entry of steps) {
        const op = Object.keys(entry).find((k) => k !== 'returns');
        const given = step(s, [op, entry[op]]);
        if ('returns' in entry) assert.deepEqual(given, expected([op], entry.returns), `${op} ${JSON.stringify(entry[op])}`);
      }
      const stored = [...s.entries()].map(({ key, value }) => [hex(key), hex(value)]);
      assert.deepEqual(stored, after.map(([k, v]) => [sameBytes(k), sameBytes(v)]), 'the stored entries');
    } catch (error) {
      failed.push(`${name}: ${error.message}`);
    }
  }
  return failed;
}

test('the state helpers pass every case of the conformance suite', () => {
  assert.deepEqual(failures(memoryState), []);
});

test('a counter stored as something else than decimal text fails the suite', () => {
  const planted = () => {
    const s = memoryState();
    s.putNumber = (key, value) => s.putStr(key, value.toFixed(1));
    return s;
  };
  assert.notDeepEqual(failures(planted), []);
});

test("Node's state is one memory state that clear() empties, with JSON helpers", () => {
  state.clear();
  state.putJson('deal/1', { stage: 'won', amount: 5 });
  assert.deepEqual(state.getJson('deal/1'), { stage: 'won', amount: 5 });
  assert.equal(state.getStr('deal/1'), '{"stage":"won","amount":5}');
  assert.equal(state.getJson('deal/2'), null);
  state.clear();
  assert.deepEqual([...state.entries()], []);
  assert.throws(() => state.put(1, 'x'), /strings or Uint8Arrays/);
});
