// The Node.js lines the gateway runs on: the maintained LTS lines 22 and 24 (and later releases).
// Checked before anything native loads: better-sqlite3 13 is built for Node >= 22 and crashes on
// Node 20 instead of failing cleanly. package.json's "engines" says the same (test/unit checks).
'use strict';

const MINIMUM = { major: 22, minor: 12 };

/** The refusal for `version` (e.g. process.version), or undefined when it is supported. */
function unsupportedNode(version) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  if (major > MINIMUM.major || (major === MINIMUM.major && minor >= MINIMUM.minor)) return undefined;
  return `creative-gateway: Node.js ${version} is not supported; use Node 22 (22.${MINIMUM.minor} or later) or Node 24. ` +
    '`npm install` puts Node 24 in node_modules/.bin, which `npm start` and `npm test` use.';
}

/** Exits the process with the one-line refusal when this Node.js is unsupported. */
function requireSupportedNode() {
  const refusal = unsupportedNode(process.version);
  if (refusal) {
    console.error(refusal);
    process.exit(1);
  }
}

module.exports = { MINIMUM, unsupportedNode, requireSupportedNode };
