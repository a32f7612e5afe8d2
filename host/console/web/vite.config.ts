import { defineConfig } from 'vite';

// The service serves the built files under /console/ and sends a CSP without
// 'unsafe-inline', so everything must be a file: no inlined assets or scripts.
export default defineConfig({
  base: '/console/',
  oxc: {
    jsx: { runtime: 'automatic', importSource: 'preact' },
  },
  build: {
    target: 'es2022',
    assetsInlineLimit: 0,
    // Every browser the console supports has modulepreload; the polyfill is dead weight.
    modulePreload: { polyfill: false },
  },
  server: {
    // `npm run dev` against a local `sluice serve` (its default address).
    proxy: { '/v1': process.env.SLUICE_API ?? 'http://127.0.0.1:8470' },
  },
});
