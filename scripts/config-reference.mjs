// Writes docs/operators/configuration-reference.md from the configuration schema
// (src/config/env-schema.ts). `--check` writes nothing and fails when the committed file is stale.
import fs from 'node:fs';
import Module, { createRequire } from 'node:module';
import path from 'node:path';
import { transformSync } from '@swc/core';

const root = path.resolve(import.meta.dirname, '..');
const check = process.argv.includes('--check');

// The schema is TypeScript: compiled as it loads (as jest does, with swc), so no build is needed.
Module._extensions['.ts'] = (module, filename) => {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    swcrc: false,
    module: { type: 'commonjs' },
    jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
  });
  module._compile(code, filename);
};
const { CONFIG_REFERENCE_PATH, renderConfigReference } = createRequire(import.meta.url)('../src/config/config-reference.ts');

const target = path.join(root, CONFIG_REFERENCE_PATH);
const text = renderConfigReference();
if (check) {
  const current = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : '';
  if (current !== text) {
    console.error(`${CONFIG_REFERENCE_PATH} is stale: run \`npm run gen\` and commit the result.`);
    process.exit(1);
  }
  console.log(`${CONFIG_REFERENCE_PATH} is up to date.`);
} else {
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, text);
}
