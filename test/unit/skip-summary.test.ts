import { spawnSync } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');

/** `npm test` says what it skipped and why: the reporter's summary after jest's own, per file, with the recorded reason. */
describe('the skip summary (test/helpers/skip-summary-reporter.js)', () => {
  it('lists each file with skipped tests, how many, and the reason the file recorded (or that it recorded none)', () => {
    const config = {
      rootDir: root,
      roots: ['<rootDir>/test/unit/fixtures/skip-summary'],
      testMatch: ['**/*.fixture.ts'],
      transform: { '^.+\\.(t|j)sx?$': ['@swc/jest', { module: { type: 'commonjs' } }] },
      reporters: ['default', '<rootDir>/test/helpers/skip-summary-reporter.js'],
    };
    const run = spawnSync(process.execPath, [require.resolve('jest/bin/jest'), '--config', JSON.stringify(config), '--ci'], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, CGW_SKIP_REASONS_DIR: '' },
    });
    expect(run.status).toBe(0);
    const summary = run.stderr.slice(run.stderr.indexOf('Skipped 3 tests, and why:'));
    expect(summary.split('\n').slice(0, 3)).toEqual([
      'Skipped 3 tests, and why:',
      '  1 in test/unit/fixtures/skip-summary/unrecorded.fixture.ts: a condition of the file itself (most: tests for the other engine, which its other integration project runs)',
      '  2 in test/unit/fixtures/skip-summary/skips.fixture.ts: no frobnicator on this machine (apt-get install frobnicator)',
    ]);
  });
});
