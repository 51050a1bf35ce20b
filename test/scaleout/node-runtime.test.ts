import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type GatewayProcess, MAIN_JS, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ADMIN_SECRET } from '../helpers/test-gateway';
import { describeOnUnsupportedNode, unsupportedNodeOnMachine } from '../helpers/unsupported-node';
import { until } from '../helpers/until';

/**
 * The built gateway on the Node.js line this suite runs on (CI runs it on 24 and on 22). A full
 * collection finalizes the SQLite statements dropped under load outside any JavaScript frame: with a
 * binding whose statements are raw ObjectWraps (better-sqlite3 <= 12) Node >= 24.19 aborts there.
 */
describe(`the gateway process on Node ${process.version}`, () => {
  let database: ThrowawayDatabase;
  let gateway: GatewayProcess | undefined;
  beforeAll(async () => {
    database = await createThrowawayDatabase('sqlite');
  });
  afterAll(async () => {
    await gateway?.stop('SIGKILL');
    await database.drop();
  });

  it('serves /healthz, /docs and local-1, and keeps serving after a burst and the idle compaction that follows it', async () => {
    // Collect at the first idle moment: how much of the heap a burst leaves free differs between Node lines and builds.
    // The burst queues at the local channel's concurrency cap; on a loaded CI machine the default 2 s wait is too short
    // for its tail, and queueing is not what this test is about.
    gateway = await startGatewayProcess({
      DATABASE_URL: database.url,
      LOG_LEVEL: 'debug',
      IDLE_COMPACTION_MIN_FREE_MB: '0',
      CHANNEL_QUEUE_TIMEOUT_MS: '60000',
    });
    const url = gateway.url;
    const admin = { Authorization: `Bearer ${ADMIN_SECRET}`, 'Content-Type': 'application/json' };
    const created = await fetch(`${url}/admin/keys`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({
        name: 'runtime',
        owner: 'ci@example.com',
        credits_quota: 10_000,
        quota_period_days: 30,
        rate_limit_rpm: 1000,
        allowed_providers: ['local'],
      }),
    });
    expect(created.status).toBe(201);
    const { key } = (await created.json()) as { key: string };
    const generate = () =>
      fetch(`${url}/images/generate`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'a lighthouse at dawn', model: 'local-1', size: '512x512', n: 2, response_format: 'b64_json' }),
      });
    // Enough garbage (statements, image buffers) that the idle compaction finds the heap worth collecting.
    const answers = await Promise.all(Array.from({ length: 48 }, () => generate()));
    const refused = await Promise.all(
      answers.filter((answer) => answer.status !== 200).map(async (answer) => `${answer.status} ${(await answer.text()).slice(0, 300)}`),
    );
    expect(refused).toEqual([]);

    await until(
      () => gateway!.output.join('').includes('idle: heap compacted') || gateway!.child.exitCode !== null || gateway!.child.signalCode !== null,
      'idle compaction or exit',
      30_000,
    );
    expect({ exitCode: gateway.child.exitCode, signal: gateway.child.signalCode }).toEqual({ exitCode: null, signal: null });
    expect(gateway.output.join('')).toContain('idle: heap compacted');

    // A second full collection a little later finalizes what the first one left behind.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/docs`)).status).toBe(200);
    expect((await generate()).status).toBe(200);
    expect(gateway.child.signalCode).toBeNull();
  });
});

const ROOT = path.resolve(__dirname, '../..');

/**
 * Every entry point that loads native code, run as a container or a service manager would (`node
 * <file>`) on the machine's own Node.js when it is older than 22: better-sqlite3 crashes it (exit
 * 139), so each must refuse in one line before it loads anything native or writes anything.
 */
describeOnUnsupportedNode('the entry points on an unsupported Node.js')("the entry points on the machine's own, unsupported Node.js", () => {
  const oldNode = unsupportedNodeOnMachine()!;
  let cwd: string;
  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-old-node-'));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  const run = (file: string, args: string[] = []) =>
    spawnSync(oldNode.path, [path.join(ROOT, file), ...args], {
      cwd,
      // What a fresh machine has: no secrets in the environment, so the gateway would generate and write them.
      env: { PATH: `${path.dirname(oldNode.path)}:/usr/bin:/bin` },
      encoding: 'utf8',
      timeout: 60_000,
    });

  it.each([
    ['dist/src/main.js', []],
    ['dist/src/migrate.js', []],
    ['scripts/start.js', []],
    ['scripts/start.js', ['migrate']],
    ['scripts/backup-sqlite.js', ['backup.db']],
  ])('node %s %j exits 1 with one line naming the supported lines and the command that works, and writes nothing', (file, args) => {
    const result = run(file, args);
    expect({ status: result.status, signal: result.signal, stdout: result.stdout }).toEqual({ status: 1, signal: null, stdout: '' });
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`Node.js ${oldNode.version} is not supported`);
    expect(lines[0]).toMatch(/Node 22 \(22\.12 or later\) or Node 24/);
    expect(lines[0]).toContain(`${path.join(ROOT, 'node_modules/.bin/node')} ${path.join(ROOT, file)}${args.map((arg) => ` ${arg}`).join('')}`);
    // No secrets generated, no database or image directory created.
    expect(fs.readdirSync(cwd)).toEqual([]);
  });

  it('the command the refusal names serves', async () => {
    const refusal = run('dist/src/main.js').stderr.trim();
    const command = refusal.slice(refusal.lastIndexOf(': ') + 2).split(' ');
    expect(command).toEqual([path.join(ROOT, 'node_modules/.bin/node'), MAIN_JS]);
    const database = await createThrowawayDatabase('sqlite');
    const gateway = await startGatewayProcess({ DATABASE_URL: database.url }, { command: command as [string, ...string[]] });
    try {
      expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    } finally {
      await gateway.stop('SIGKILL');
      await database.drop();
    }
  });
});
