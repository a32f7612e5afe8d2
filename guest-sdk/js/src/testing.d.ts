// Types for `@sluice/transform/testing`: run a transform natively in unit tests.

import type { ChangeType, Transform } from './index.js';

/** A batch held in memory: columns by name, one value per row. */
export declare class TestBatch {
  constructor(
    columns: Record<string, unknown[]> | Map<string, unknown[]>,
    options?: {
      changeTypes?: ChangeType[];
      commitVersions?: Array<bigint | number>;
      commitTimestamps?: Array<bigint | number>;
    },
  );
}

/** A record the transform emitted, with keys, values and header values as strings. */
export interface EmittedRecord {
  key?: string;
  value?: string;
  topic?: string;
  partition?: number;
  headers: Array<[string, string]>;
}

/** What a transform made of a batch. */
export interface Result {
  records: EmittedRecord[];
  /** The batch row each record came from. */
  rows: number[];
  rejected: Array<[number, string]>;
}

/** Makes the transform, calls `init(params)` and `transform` on `batch` as the host
 * does, and returns what it emitted. */
export declare function run(
  transform: new () => Transform,
  batch: TestBatch,
  params?: Record<string, string>,
): Result;
