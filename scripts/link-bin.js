#!/usr/bin/env node
// `npm install` (postinstall): links node_modules/.bin/creative-gateway to bin/creative-gateway.js.
// `npx creative-gateway` (npm exec) runs a command it finds in node_modules/.bin at once. The
// project has no "bin" field for it to find instead: npm exec then installs the project itself
// into its npx cache on every call, running `prepare` (the whole build) each time: 5 to 15 s a call,
// and the engine warnings twice.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const link = path.join(root, 'node_modules/.bin/creative-gateway');
const target = path.relative(path.dirname(link), path.join(root, 'bin/creative-gateway.js'));

function linkedTarget() {
  try {
    return fs.readlinkSync(link);
  } catch {
    return undefined;
  }
}

if (linkedTarget() !== target) {
  fs.mkdirSync(path.dirname(link), { recursive: true });
  fs.rmSync(link, { force: true });
  fs.symlinkSync(target, link);
}
// npm prints no progress when its output is piped: say where the install is and what comes next.
console.log('creative-gateway: dependencies installed, node_modules/.bin/creative-gateway linked; next, the build (prepare: tsc, then the console)');
