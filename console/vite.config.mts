// Builds the operator console (console/) into dist/console, which the gateway serves at /console
// (src/console/console.handlers.ts). Every emitted file is `<name>-<hash>.<ext>` at the top of
// dist/console: the gateway serves them immutable, and its route takes one path segment.
import { fileURLToPath } from 'node:url';
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/console/',
  plugins: [preact()],
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    assetsDir: '',
    // Fonts and images stay files: the CSP allows no inline data beyond the empty favicon.
    assetsInlineLimit: 0,
    sourcemap: false,
    modulePreload: { polyfill: false },
    rollupOptions: {
      output: {
        entryFileNames: '[name]-[hash:8].js',
        chunkFileNames: '[name]-[hash:8].js',
        assetFileNames: '[name]-[hash:8][extname]',
      },
    },
  },
});
