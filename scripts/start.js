#!/usr/bin/env node
// `npm start` (and `npm run migrate`: `start.js migrate`): builds dist/ when the sources are newer,
// then runs the gateway (or the migrations) in THIS process.
// package.json runs it with `exec`, so the process npm signals (SIGTERM from a process manager,
// SIGINT from Ctrl-C) is the gateway itself; `sh -c "build && node ..."` kept a shell in between
// that died on SIGTERM and left node serving.
'use strict';
require('./supported-node').requireSupportedNode();
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const entry = path.join(root, 'dist/src', process.argv[2] === 'migrate' ? 'migrate.js' : 'main.js');

/** Newest modification time of any file under the given directories (0 when there are none). */
function newestChange(directories) {
  let newest = 0;
  const walk = (directory) => {
    for (const item of fs.readdirSync(directory, { withFileTypes: true })) {
      const full = path.join(directory, item.name);
      if (item.isDirectory()) walk(full);
      else newest = Math.max(newest, fs.statSync(full).mtimeMs);
    }
  };
  for (const directory of directories) if (fs.existsSync(directory)) walk(directory);
  return newest;
}

const sources = ['src', 'generated'].map((directory) => path.join(root, directory));
const built = fs.existsSync(entry) ? fs.statSync(entry).mtimeMs : 0;
if (built === 0 || newestChange(sources) > newestChange([path.join(root, 'dist/src'), path.join(root, 'dist/generated')])) {
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  if (!fs.existsSync(tsc)) {
    console.error(`creative-gateway: ${built === 0 ? 'dist/ is missing' : 'dist/ is older than src/'} and TypeScript is not installed; run npm install (or npm run build) first`);
    process.exit(1);
  }
  const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
// The console (console/, served at /console) is built the same way; without Vite (a production
// install without dev dependencies) the gateway still starts, and /console answers 404 until it is built.
const { consoleIsStale, buildConsole } = require('./build-console');
if (consoleIsStale()) {
  const status = buildConsole();
  if (status === null) console.error('creative-gateway: the console is not built and Vite is not installed; /console answers 404 (run npm install, then npm run build)');
  else if (status !== 0) process.exit(status);
}
require(entry);
