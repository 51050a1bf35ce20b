import { spawn } from 'node:child_process';
import { MAIN_JS, gatewayProcessEnv } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ThrowawayRedis, freePort } from '../helpers/throwaway-servers';
import { until } from '../helpers/until';

interface Run {
  stdout: string[];
  stderr: string[];
  exited: Promise<number | null>;
  kill(): void;
}

/** The built gateway as a process, its output kept apart: logs on stdout, the exit line on stderr. */
function run(env: Record<string, string>): Run {
  const child = spawn(process.execPath, [MAIN_JS], { env: gatewayProcessEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { stdout, stderr, exited, kill: () => child.kill('SIGKILL') };
}

describe('PostgreSQL or Redis unreachable at startup', () => {
  let sqlite: ThrowawayDatabase;
  beforeAll(async () => {
    sqlite = await createThrowawayDatabase('sqlite');
  });
  afterAll(() => sqlite.drop());

  it.each([
    ['PostgreSQL', async () => ({ DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/gateway` })],
    ['Redis', async () => ({ DATABASE_URL: sqlite.url, REDIS_URL: `redis://127.0.0.1:${await freePort()}` })],
  ])('%s: retries for DEPENDENCY_STARTUP_TIMEOUT_MS, then exits 78 with one line and no stack trace', async (label, env) => {
    const gateway = run({ ...(await env()), DEPENDENCY_STARTUP_TIMEOUT_MS: '600' });
    expect(await gateway.exited).toBe(78);
    const lines = gateway.stderr.join('').trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`^Startup error: ${label} is unreachable: gave up after \\d+\\.\\d s \\(DEPENDENCY_STARTUP_TIMEOUT_MS=600\\): .*ECONNREFUSED`),
    );
    // It did retry, and said so in its log.
    expect(gateway.stdout.join('')).toContain(`${label} is unreachable; retrying`);
  });

  it('a Redis that is up: the gateway starts without logging a retry (its connection was still under way)', async () => {
    const redis = await ThrowawayRedis.start();
    const gateway = run({ DATABASE_URL: sqlite.url, REDIS_URL: redis.url });
    try {
      await until(async () => gateway.stdout.join('').includes('gateway listening'), 'the gateway listening', 20_000);
      expect(gateway.stdout.join('')).not.toContain('unreachable; retrying');
    } finally {
      gateway.kill();
      await gateway.exited;
      await redis.kill();
    }
  });

  it('a Redis that comes up within the bound: the gateway waits for it and starts', async () => {
    const port = await freePort();
    const gateway = run({ DATABASE_URL: sqlite.url, REDIS_URL: `redis://127.0.0.1:${port}`, DEPENDENCY_STARTUP_TIMEOUT_MS: '30000' });
    let redis: ThrowawayRedis | undefined;
    try {
      await until(async () => gateway.stdout.join('').includes('Redis is unreachable; retrying'), 'a retry', 20_000);
      redis = await ThrowawayRedis.start(port);
      await until(async () => gateway.stdout.join('').includes('gateway listening'), 'the gateway listening', 20_000);
    } finally {
      gateway.kill();
      await gateway.exited;
      await redis?.kill();
    }
  });
});
