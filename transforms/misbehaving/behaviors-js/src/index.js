// A JavaScript module that breaks the host's limits on purpose, through the SDK, for
// the limit tests. Parameter `behavior`: `loop` (never returns) or `hog` (grows memory
// without end); anything else emits each row keyed by `documentId`, its change type
// as value.

import { exportTransform } from '@sluice/transform';

class Behaviors {
  init(params) {
    this.behavior = params.get('behavior', '');
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
    for (const row of batch.rows()) {
      out.emit(row, { key: row.get('documentId'), value: row.changeType });
    }
  }
}

export const transformer = exportTransform(Behaviors);
