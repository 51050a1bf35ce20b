// Test tiers, one jest project (or two) each, each with its npm script (README, Development):
//   unit         test/unit: no build, no database, no gateway
//   integration  in-process gateways on SQLite (every folder not named below, so new folders land here),
//                and the storage folders again on PostgreSQL + Redis (TEST_DB=postgres)
//   processes    real processes from dist/ (built once by global setup): scaleout, dependency faults, CLI
//   conformance  the spec-conformance stage against a gateway process, and the spec tools
//   browser      the /docs page and the operator console in Chromium (global setup builds the console)
// `npm run test:sqlite` (TEST_SQLITE_ONLY=1) leaves out the PostgreSQL project.
const base = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { module: { type: 'commonjs' } }],
    // The OTLP exporter loads node:http with import(), which jest's CommonJS runtime cannot run: made a require.
    '/@opentelemetry/otlp-exporter-base/.+\\.cjs$': ['@swc/jest', { module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!(@scalar|jose|openid-client|oauth4webapi|@opentelemetry/otlp-exporter-base)/)'],
};
const buildDist = '<rootDir>/test/helpers/global-setup.js';
const buildConsole = '<rootDir>/test/helpers/global-setup-console.js';
// The integration tiers record what each operation answered; after the whole SQLite tier, the records are
// checked (docs/maintainers/test-tiers.md, "Operation coverage").
const operationRecords = '<rootDir>/test/helpers/global-setup-operation-records.js';
const operationCoverage = '<rootDir>/test/helpers/global-teardown-operation-coverage.js';
const PROCESS_FOLDERS = ['scaleout', 'dependencies', 'cli'];
const OWN_TIER = ['unit', ...PROCESS_FOLDERS, 'conformance', 'browser'];
// Storage tests, run on PostgreSQL + Redis too. test/scaleout starts real processes on both engines itself.
const STORAGE_FOLDERS = ['keys', 'generation', 'http', 'leases', 'ratelimit', 'providers', 'internal', 'images', 'channels', 'webhooks', 'usage', 'guardrails', 'console-sso'];

const projects = [
  { ...base, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
  {
    ...base,
    displayName: 'integration-sqlite',
    testMatch: ['<rootDir>/test/**/*.test.ts'],
    testPathIgnorePatterns: ['/node_modules/', `<rootDir>/test/(${OWN_TIER.join('|')})/`],
    globalSetup: operationRecords,
    globalTeardown: operationCoverage,
  },
  {
    ...base,
    displayName: 'integration-postgres',
    testMatch: [`<rootDir>/test/{${STORAGE_FOLDERS.join(',')}}/**/*.test.ts`],
    setupFiles: ['<rootDir>/test/helpers/use-postgres.ts'],
    globalSetup: operationRecords,
  },
  { ...base, displayName: 'processes', testMatch: [`<rootDir>/test/{${PROCESS_FOLDERS.join(',')}}/**/*.test.ts`], globalSetup: buildDist },
  { ...base, displayName: 'conformance', testMatch: ['<rootDir>/test/conformance/**/*.test.ts'], globalSetup: buildDist },
  { ...base, displayName: 'browser', testMatch: ['<rootDir>/test/browser/**/*.test.ts'], globalSetup: buildConsole },
];

/** @type {import('jest').Config} */
module.exports = {
  testTimeout: 30000,
  // After jest's own summary: what was skipped, and why (test/helpers/skip-reasons.ts).
  reporters: ['default', '<rootDir>/test/helpers/skip-summary-reporter.js'],
  projects: process.env.TEST_SQLITE_ONLY === '1' ? projects.filter((p) => p.displayName !== 'integration-postgres') : projects,
};
