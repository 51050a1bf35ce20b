#!/usr/bin/env node
// Builds the operator console (console/, Vite) into dist/console, which the gateway serves at
// /console. `npm run build` runs it after tsc; scripts/start.js and the test tiers' global setup
// run it when the console's sources are newer than the build (consoleIsStale).
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const output = path.join(root, 'dist/console/index.html');
/** What the console is built from: its folder, the spec's types it is typed against, the registry's transports, its toolchain. */
const SOURCES = ['console', 'generated/gateway.ts', 'generated/channel-transports.ts', 'package-lock.json'].map((entry) => path.join(root, entry));

function newestChange(entries) {
  let newest = 0;
  const walk = (entry) => {
    if (!fs.existsSync(entry)) return;
    const stat = fs.statSync(entry);
    if (!stat.isDirectory()) {
      newest = Math.max(newest, stat.mtimeMs);
      return;
    }
    for (const item of fs.readdirSync(entry)) walk(path.join(entry, item));
  };
  for (const entry of entries) walk(entry);
  return newest;
}

function consoleIsStale() {
  return !fs.existsSync(output) || newestChange(SOURCES) > fs.statSync(output).mtimeMs;
}

/** Runs `vite build`; returns its exit status (0 when built), or null when Vite is not installed. */
function buildConsole() {
  let vite;
  try {
    vite = path.join(path.dirname(require.resolve('vite/package.json', { paths: [root] })), 'bin/vite.js');
  } catch {
    return null;
  }
  const build = spawnSync(process.execPath, [vite, 'build', '--config', path.join(root, 'console/vite.config.mts')], { cwd: root, stdio: 'inherit' });
  return build.status ?? 1;
}

module.exports = { consoleIsStale, buildConsole };

if (require.main === module) {
  const status = buildConsole();
  if (status === null) {
    console.error('creative-gateway: Vite is not installed (npm install); the console was not built');
    process.exit(1);
  }
  process.exit(status);
}
