// The first import of every compiled entry point (dist/src/main.js, dist/src/migrate.js): on an
// unsupported Node.js, one line and exit 1 before any other module loads. A module of its own
// because imports are hoisted: better-sqlite3, built for Node >= 22, crashes Node 20 as it loads,
// and the secrets would be written first. The rule lives in scripts/supported-node.js, plain
// JavaScript that scripts/start.js and the CLI run before dist/ is built.
import path from 'node:path';

// Compiled to dist/src/, two levels below the project root.
const supportedNode = require(path.resolve(__dirname, '../../scripts/supported-node.js')) as { requireSupportedNode(): void };
supportedNode.requireSupportedNode();
