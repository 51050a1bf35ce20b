#!/usr/bin/env node
// The admin CLI (`npx creative-gateway keys ...`); built into dist/ by `npm install` (prepare).
require("../scripts/supported-node").requireSupportedNode();
require("../dist/src/cli/main.js").main();
