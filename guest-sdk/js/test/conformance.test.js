// The SDK conformance suite (guest-sdk/conformance/): the JS packer and the test
// harness's selections must give what every SDK and the host give.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { BatchError } from '../src/model.js';
import { Packer } from '../src/packing.js';
import { TestBatch, run } from '../src/testing.js';

const suite = (name) => JSON.parse(readFileSync(new URL(`../../conformance/${name}`, import.meta.url)));

const hex = (bytes) => Buffer.from(bytes).toString('hex');
const asBytes = (value) => (typeof value === 'string' ? value : Uint8Array.from(Buffer.from(value.hex, 'hex')));

function record(caseRecord) {
  const { key, value, topic, partition, headers } = caseRecord;
  return {
    key: key === undefined ? null : asBytes(key),
    value: value === undefined ? null : asBytes(value),
    topic,
    partition,
    headers: (headers ?? []).map(([name, headerValue]) => [name, asBytes(headerValue)]),
  };
}

/** Names of the packing cases `makePacker` gets wrong, with what it made. */
function packingFailures(makePacker) {
  const failures = [];
  for (const { name, records, packed } of suite('packing.json').cases) {
    const packer = makePacker();
    for (const caseRecord of records) packer.add(caseRecord.row, record(caseRecord));
    const made = Object.fromEntries(
      Object.entries(packer.packed()).map(([field, list]) => [field, field === 'data' ? hex(list) : [...list]]),
    );
    const expected = {
      data: packed.data,
      sourceRows: packed.source_rows,
      keyLengths: packed.key_lengths,
      valueLengths: packed.value_lengths,
      topics: packed.topics,
      topicIndexes: packed.topic_indexes,
      partitions: packed.partitions,
      headerNames: packed.header_names,
      headerCounts: packed.header_counts,
      headerNameIndexes: packed.header_name_indexes,
      headerValueLengths: packed.header_value_lengths,
    };
    try {
      assert.deepEqual(made, expected);
    } catch {
      failures.push(`${name}: made ${JSON.stringify(made)}`);
    }
  }
  return failures;
}

test('the packer makes the packed lists of every case', () => {
  assert.deepEqual(packingFailures(() => new Packer()), []);
});

test('a packer that gets key lengths wrong fails the suite', () => {
  class Broken extends Packer {
    packed() {
      const packed = super.packed();
      packed.keyLengths = packed.keyLengths.map((length) => Math.max(length - 1, -1));
      return packed;
    }
  }
  const failures = packingFailures(() => new Broken());
  assert.ok(failures.some((failure) => failure.startsWith('keys, values and tombstones')), failures.join('\n'));
});

function suiteBatch() {
  const { columns, change_types } = suite('selections.json').batch;
  const convert = {
    long: BigInt,
    double: Number,
    string: String,
    boolean: Boolean,
    binary: (value) => Uint8Array.from(Buffer.from(value.hex, 'hex')),
  };
  return new TestBatch(
    Object.fromEntries(
      columns.map(({ name, type, values }) => [name, values.map((v) => (v === null ? null : convert[type](v)))]),
    ),
    { changeTypes: change_types },
  );
}

/** Runs `select` inside a transform over the suite's batch, as a module would. */
function selectInTransform(select) {
  let selected;
  class Selects {
    transform(batch) {
      selected = select(batch);
    }
  }
  run(Selects, suiteBatch());
  return selected;
}

for (const testCase of suite('selections.json').cases) {
  test(`selection: ${testCase.name}`, () => {
    const select = (batch) => {
      if (testCase.select_change_types) {
        const { types, within } = testCase.select_change_types;
        return batch.selectChangeTypes(types, within);
      }
      const { column, op, value, within } = testCase.select_where;
      return batch.selectWhere(column, op, value, within);
    };
    if (testCase.error) {
      assert.throws(
        () => selectInTransform(select),
        (error) => error instanceof BatchError && error.message.includes(testCase.error),
      );
    } else {
      assert.deepEqual([...selectInTransform(select)], testCase.rows);
    }
  });
}
