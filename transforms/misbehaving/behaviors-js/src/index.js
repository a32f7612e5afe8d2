// A JavaScript module that breaks the host's limits on purpose, through the SDK, for
// the limit tests. Parameter `behavior`: `loop` (never returns), `hog` (grows memory
// without end) or `where` (has the host select the rows whose `documentId` is the
// parameter `id` and encode them as JSON); anything else emits each row keyed by
// `documentId`, its change type as value.

import { JSON_ROW, column, exportTransform } from '@sluice/transform';

class Behaviors {
  init(params) {
    this.behavior = params.get('behavior', '');
    this.id = params.get('id', '');
  }

  transform(batch, out) {
    if (this.behavior === 'loop') {
      let n = 0;
      for (;;) n++;
    }
    if (this.behavior === 'hog') {
      const hog = [];
      for (;;) hog.push(new Uint8Array(1 << 20).fill(1));
    }
    if (this.behavior === 'where') {
      const rows = batch.selectWhere('documentId', '==', this.id);
      out.encode({ rows, key: column('documentId'), value: JSON_ROW });
      return;
    }
    for (const row of batch.rows()) {
      out.emit(row, { key: row.get('documentId'), value: row.changeType });
    }
  }
}

export const transformer = exportTransform(Behaviors);
