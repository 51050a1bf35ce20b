// The operation coverage check (docs/maintainers/test-tiers.md, "Operation coverage"): reads what each
// operation answered in the integration tier (written by test/helpers/operation-recorder.ts) and fails
// when an operation of the specs lacks a test answered with a documented 2xx, with each documented error
// status, or (with security) a 401, unless test/contract/operation-coverage-exceptions.json excuses it.
// The SQLite integration tier runs it after a whole run (test/helpers/global-teardown-operation-coverage.js);
// by hand, after one: `node scripts/check-operation-coverage.mjs`. The rule is test/helpers/operation-coverage.ts.
import fs from 'node:fs';
import Module, { createRequire } from 'node:module';
import path from 'node:path';
import { transformSync } from '@swc/core';

const root = path.resolve(import.meta.dirname, '..');
const require = createRequire(import.meta.url);

// The rule and the spec loader are TypeScript: compiled as they load (as jest does, with swc).
Module._extensions['.ts'] = (module, filename) => {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    swcrc: false,
    module: { type: 'commonjs' },
    jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
  });
  module._compile(code, filename);
};
const { coverageReport, documentedOperations } = require('../test/helpers/operation-coverage.ts');
const { loadOpenApiDocument } = require('../src/http/openapi-document.ts');
const { OPERATION_RECORDS } = require('../test/helpers/global-setup-operation-records.js');

const EXCEPTIONS = 'test/contract/operation-coverage-exceptions.json';
const files = fs.existsSync(OPERATION_RECORDS) ? fs.readdirSync(OPERATION_RECORDS).filter((f) => f.endsWith('.jsonl')) : [];
const records = files.flatMap((file) =>
  fs
    .readFileSync(path.join(OPERATION_RECORDS, file), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line)),
);
if (records.length === 0) {
  console.error(`No operation records in ${path.relative(root, OPERATION_RECORDS)}: run the integration tier first (did the recorder stop hooking the apps?).`);
  process.exit(1);
}
const operations = ['gateway', 'creative'].flatMap((api) => documentedOperations(api, loadOpenApiDocument(api)));
const exceptions = JSON.parse(fs.readFileSync(path.join(root, EXCEPTIONS), 'utf8'));
const { gaps, excused, sharedUnanswered, staleExceptions } = coverageReport(operations, records, exceptions);

for (const gap of gaps) console.error(`${gap.api} ${gap.operationId}: no test answered ${gap.missing.join(', ')}`);
for (const name of sharedUnanswered) console.error(`shared response ${name}: no operation answered it`);
for (const entry of staleExceptions) console.error(`${EXCEPTIONS}: "${entry}" excuses nothing missing; remove it`);
const nameOf = (operation) => `${operation.api} ${operation.operationId}`;
const gapped = new Set(gaps.map(nameOf));
const excusedOnly = new Set(excused.map((key) => key.split(' ').slice(0, 2).join(' ')).filter((name) => !gapped.has(name)));
const full = operations.length - gapped.size - excusedOnly.size;
console.log(
  `Operation coverage: ${operations.length} operations, ${full} fully covered, ${excusedOnly.size} covered but for excused requirements, ${gaps.length} with gaps (${excused.length} requirements excused, ${records.length} records).`,
);
if (gaps.length > 0 || sharedUnanswered.length > 0 || staleExceptions.length > 0) process.exit(1);
