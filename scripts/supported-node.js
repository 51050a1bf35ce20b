// The Node.js lines the gateway runs on: the maintained LTS lines 22 and 24 (and later releases).
// Checked before anything native loads or anything is written: better-sqlite3 13 is built for
// Node >= 22 and crashes on Node 20 (exit 139) instead of failing cleanly. package.json's "engines"
// says the same (test/unit checks). Plain JavaScript, so that every entry point can run it first:
// scripts/start.js and bin/creative-gateway.js before dist/ exists, and the compiled entry points
// (dist/src/main.js, dist/src/migrate.js) through src/require-supported-node.ts, their first import.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const MINIMUM = { major: 22, minor: 12 };

/** The Node 24 that `npm install` puts in the project (the `node` devDependency); absent in a production install. */
const SHIPPED_NODE = path.resolve(__dirname, '../node_modules/.bin/node');

/** A path as the user would type it from `cwd`: relative when it is below it. */
function typed(file, cwd) {
  const relative = path.relative(cwd, file);
  return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

/** An argument as a POSIX shell takes it back. */
function quoted(argument) {
  return /^[\w@%+=:,./-]+$/.test(argument) ? argument : `'${argument.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command that runs the same script with the same arguments on the project's own Node 24, or
 * undefined when there is none (a production install without dev dependencies).
 */
function commandThatWorks(argv, cwd, shippedNode = SHIPPED_NODE) {
  if (!fs.existsSync(shippedNode) || argv[1] === undefined) return undefined;
  return [typed(shippedNode, cwd), typed(path.resolve(cwd, argv[1]), cwd), ...argv.slice(2)].map(quoted).join(' ');
}

/**
 * The refusal for `version` (e.g. process.version), or undefined when it is supported. `command` is
 * what to run instead (see commandThatWorks).
 */
function unsupportedNode(version, command) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  if (major > MINIMUM.major || (major === MINIMUM.major && minor >= MINIMUM.minor)) return undefined;
  const instead = command
    ? `Run it on the Node 24 that \`npm install\` put in node_modules/.bin: ${command}`
    : 'Install one of them (nodejs.org), or `npm install` the dev dependencies, which bring Node 24 to node_modules/.bin.';
  return `creative-gateway: Node.js ${version} is not supported; use Node 22 (22.${MINIMUM.minor} or later) or Node 24. ${instead}`;
}

/** Exits the process with the one-line refusal when this Node.js is unsupported. */
function requireSupportedNode() {
  const refusal = unsupportedNode(process.version, commandThatWorks(process.argv, process.cwd()));
  if (refusal) {
    console.error(refusal);
    process.exit(1);
  }
}

module.exports = { MINIMUM, unsupportedNode, commandThatWorks, requireSupportedNode };
