import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describeOnUnsupportedNode, unsupportedNodeOnMachine } from '../helpers/unsupported-node';

const ROOT = path.resolve(__dirname, '../..');

/** `node bin/creative-gateway.js …` as a newcomer types it on a machine whose own node is 20. */
describeOnUnsupportedNode('the CLI on an unsupported Node.js')("the CLI on the machine's own, unsupported Node.js", () => {
  const oldNode = unsupportedNodeOnMachine()!;
  const run = (command: string, args: string[]) =>
    spawnSync(command, args, { cwd: ROOT, env: { PATH: `${path.dirname(oldNode.path)}:/usr/bin:/bin` }, encoding: 'utf8', timeout: 30_000 });

  it('refuses in one line that names the command that works, and that command works', () => {
    const refused = run(oldNode.path, ['bin/creative-gateway.js', '--version']);
    expect({ status: refused.status, stdout: refused.stdout }).toEqual({ status: 1, stdout: '' });
    const line = refused.stderr.trim();
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain(`Node.js ${oldNode.version} is not supported`);
    expect(line).toMatch(/: node_modules\/\.bin\/node bin\/creative-gateway\.js --version$/);

    const [command, ...args] = line.slice(line.lastIndexOf(': ') + 2).split(' ');
    const works = run(command!, args);
    expect({ status: works.status, stderr: works.stderr }).toEqual({ status: 0, stderr: '' });
    expect(works.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('what the CLI loads', () => {
  // What keeps `creative-gateway …` quick to start: the admin API over HTTP needs no server-side
  // module; a command that does (e.g. one reading the configuration) loads it in its action.
  it('loads commander and its own modules, nothing of the server (express, the database drivers, the S3 SDK)', () => {
    const script = `require(${JSON.stringify(path.join(ROOT, 'dist/src/cli/main.js'))});
      console.log(JSON.stringify(Object.keys(require.cache)))`;
    const loaded = JSON.parse(spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' }).stdout) as string[];
    const packages = new Set(loaded.flatMap((file) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? []));
    expect(packages.has('commander')).toBe(true);
    const heavy = ['express', 'better-sqlite3', 'pg', 'ioredis', 'kysely', 'pino', '@aws-sdk/client-s3', 'express-openapi-validator', 'zod', 'undici'];
    expect(heavy.filter((name) => packages.has(name))).toEqual([]);
  });
});
