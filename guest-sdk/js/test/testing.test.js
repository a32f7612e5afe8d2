// The native test harness runs a transform as the host does, through the package's
// Node entry (native.js).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CHANGE_TYPE, ChangeType, RowError, column, exportTransform } from '@sluice/transform';
import { TestBatch, run } from '@sluice/transform/testing';

class WonDeals {
  init(params) {
    this.stage = params.get('stage', 'closedwon');
  }

  transform(batch, out) {
    for (const row of batch.rows()) {
      const deal = row.get('documentId');
      if (deal === null) out.reject(row, 'The deal has no documentId.');
      else if (row.changeType === ChangeType.Delete) out.emit(row, { key: deal });
      else if (row.get('fullDocument.stage') === this.stage) {
        out.emit(row, { key: deal, value: JSON.stringify({ id: deal }), headers: { op: row.changeType } });
      }
    }
  }
}

const batch = new TestBatch(
  { documentId: ['d1', 'd2', null, 'd4'], 'fullDocument.stage': ['closedwon', 'new', null, 'closedwon'] },
  { changeTypes: [ChangeType.Insert, ChangeType.Delete, ChangeType.Insert, ChangeType.UpdatePostimage] },
);

test('records, rows and rejections come back in order', () => {
  assert.equal(exportTransform(WonDeals), WonDeals, 'nothing to export outside a module');
  const result = run(WonDeals, batch, { stage: 'closedwon' });
  assert.deepEqual(result.rows, [0, 1, 3]);
  assert.deepEqual(result.records, [
    { key: 'd1', value: '{"id":"d1"}', headers: [['op', 'insert']] },
    { key: 'd2', headers: [] },
    { key: 'd4', value: '{"id":"d4"}', headers: [['op', 'update_postimage']] },
  ]);
  assert.deepEqual(result.rejected, [[2, 'The deal has no documentId.']]);
});

test('selections work natively and encoding points to preview', () => {
  class Selects {
    transform(b, out) {
      const inserts = b.selectChangeTypes([ChangeType.Insert]);
      assert.deepEqual([...inserts], [0, 2]);
      assert.deepEqual([...b.selectWhere('fullDocument.stage', '==', 'closedwon', inserts)], [0]);
      assert.deepEqual([...b.selectWhere('documentId', 'is null')], [2]);
      out.encode({ rows: inserts, key: column('documentId'), headers: { op: CHANGE_TYPE } });
    }
  }
  assert.throws(() => run(Selects, batch), /sluice preview/);
});

test('errors and missing columns surface', () => {
  class Fails {
    transform(b) {
      throw new RowError(b.row(1), 'bad deal');
    }
  }
  assert.throws(() => run(Fails, batch), (e) => e instanceof RowError && e.row === 1);
  class Missing {
    transform(b) {
      b.column('nope');
    }
  }
  assert.throws(() => run(Missing, batch), /no column named `nope`/);
  assert.throws(() => new TestBatch({ a: [1], b: [1, 2] }), /same number of rows/);
});

test('a row rejected twice keeps its first reason, as on the host', () => {
  class RejectsTwice {
    transform(b, out) {
      const [row] = b.rows();
      out.reject(row, 'first reason');
      out.reject(row, 'second reason');
    }
  }
  assert.deepEqual(run(RejectsTwice, batch).rejected, [[0, 'first reason']]);
});

test('records cross to the host in runs of one framing, in emission order', async () => {
  const { Output } = await import('../src/batch.js');
  const { jsonSchema, avroSchema } = await import('../src/model.js');
  const calls = [];
  const host = {
    emitPacked: (packed) => calls.push(['plain', Array.from(packed.sourceRows)]),
    emitFramed: (packed, framing) => calls.push([framing.value?.kind ?? framing.key.kind, Array.from(packed.sourceRows)]),
  };
  const out = new Output(host);
  const deals = { value: jsonSchema('{"type":"object"}') };
  out.emit(0, { value: 'plain' });
  out.emitFramed(1, deals, { value: '{}' });
  out.emitFramed(2, { value: jsonSchema('{"type":"object"}') }, { value: '{}' });
  out.emitFramed(3, { key: avroSchema('"string"') }, { key: '\u0002k' });
  out.emit(3, {});
  out.flush();
  assert.deepEqual(calls, [
    ['plain', [0]],
    ['json-schema', [1, 2]],
    ['avro', [3]],
    ['plain', [3]],
  ]);
});
