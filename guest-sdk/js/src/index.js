// The JavaScript SDK for Sluice transforms, inside a module: see README.md and
// index.d.ts. Node resolves the package to native.js, for unit tests.

export * from './api.js';
export { log, exportTransform, state } from './guest.js';
