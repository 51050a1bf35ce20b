// Two projects: the whole suite on SQLite, and every test that touches storage again on
// PostgreSQL + Redis (TEST_DB=postgres), so both engines pass the same tests.
const base = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.(t|j)sx?$': ['@swc/jest', { module: { type: 'commonjs' } }] },
  transformIgnorePatterns: ['/node_modules/(?!(@scalar|jose)/)'],
};

/** @type {import('jest').Config} */
module.exports = {
  testTimeout: 30000,
  globalSetup: '<rootDir>/test/helpers/global-setup.js',
  projects: [
    { ...base, displayName: 'sqlite', testMatch: ['<rootDir>/test/**/*.test.ts'] },
    // test/scaleout starts real processes on both engines itself, so it runs once (above).
    {
      ...base,
      displayName: 'postgres',
      testMatch: ['<rootDir>/test/{keys,generation,http,ratelimit,providers,internal,images,channels,webhooks}/**/*.test.ts'],
      setupFiles: ['<rootDir>/test/helpers/use-postgres.ts'],
    },
  ],
};
