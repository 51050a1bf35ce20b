// Global setup of the tiers that start gateway processes from dist/ (processes, conformance): builds
// dist/ (`tsc -p tsconfig.build.json`, as `npm run build`) unless it was built from the same sources
// already (scripts/dist-stamp.js; `npm run build`, which `npm install` runs, stamps its build), as when
// `npm test` runs the conformance tier after the processes tier, and the console
// (dist/console, as `npm run build`) when its sources changed. Unit and integration tests run the
// TypeScript sources in-process and never build; the browser tier builds only the console
// (global-setup-console.js).
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const { distIsCurrent, writeDistStamp } = require('../../scripts/dist-stamp');
const { buildConsoleIfStale } = require('./global-setup-console');

const root = path.resolve(__dirname, '../..');

module.exports = async () => {
  buildConsoleIfStale();
  if (distIsCurrent()) return;
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  writeDistStamp();
};
