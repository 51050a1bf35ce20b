#!/usr/bin/env node
// `npm run build` (and `npm install`, through `prepare`): tsc into dist/, its stamp, the console with
// Vite. Each step says what it does before it starts and how long it took, so that an install whose
// output is piped (CI, `| tee`) is not silent through the build.
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const STEPS = [
  ['compiling src/ into dist/ (tsc -p tsconfig.build.json)', [require.resolve('typescript/bin/tsc', { paths: [root] }), '-p', 'tsconfig.build.json']],
  ['stamping dist/ with its sources (scripts/dist-stamp.js)', [path.join(__dirname, 'dist-stamp.js')]],
  ['building the operator console into dist/console (Vite)', [path.join(__dirname, 'build-console.js')]],
];

module.exports = { STEPS };

if (require.main === module) build();

function build() {
  for (const [what, args] of STEPS) {
    const started = Date.now();
    console.log(`creative-gateway build: ${what}…`);
    const run = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
    if (run.status !== 0) {
      console.error(`creative-gateway build: failed while ${what}`);
      process.exit(run.status ?? 1);
    }
    console.log(`creative-gateway build: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}
