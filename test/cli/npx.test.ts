import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

/** `npx creative-gateway …`, as docs/operators/cli.md writes every command. */
describe('npx creative-gateway', () => {
  it('runs the bin that npm install linked in node_modules/.bin: it neither installs nor builds the project', () => {
    expect(fs.readlinkSync(path.join(ROOT, 'node_modules/.bin/creative-gateway'))).toBe('../../bin/creative-gateway.js');
    const result = spawnSync('npm', ['exec', '--loglevel=silly', '--timing', '--', 'creative-gateway', '--version'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME ?? '/tmp' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect({ status: result.status, stdout: result.stdout }).toEqual({ status: 0, stdout: `${version}\n` });
    // Finding the command through package.json instead, npm exec reads the whole dependency tree (an
    // Arborist: seconds) and installs the project into its npx cache, running its prepare (the whole build).
    expect(result.stderr).not.toMatch(/arborist/i);
    expect(result.stderr).not.toMatch(/\brun creative-gateway@\S+ (prepare|postinstall)\b/);
    expect(result.stderr).not.toContain('EBADENGINE');
  });
});
