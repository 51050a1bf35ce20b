import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { MAIN_JS, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase } from '../helpers/test-database';
import { ADMIN_SECRET, SERVICE_TOKEN } from '../helpers/test-gateway';

/** Runs the built gateway in a fresh directory until it exits (these configurations never start). */
function runGateway(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string; cwd: string }> {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-startup-'));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN_JS],
      { cwd, timeout: 30_000, env: { PATH: process.env.PATH, PORT: '0', INTERNAL_PORT: '0', HOST: '127.0.0.1', ADMIN_SECRET, LOG_LEVEL: 'info', ...env } },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr, cwd }),
    );
  });
}

const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');
const NO_STACK = /^\s+at |Error:|node:internal/m;

describe('startup failures an operator can fix: one line, no stack trace, a meaningful exit code', () => {
  it.each(['mysql://gateway:hunter2-password@db:3306/gateway', 'mongodb+srv://cluster/db', 'redis://cache:6379'])(
    'DATABASE_URL=%s (an unknown scheme) stops with exit 78 and names the accepted forms',
    async (databaseUrl) => {
      const run = await runGateway({ DATABASE_URL: databaseUrl });
      expect(run.code).toBe(78);
      expect(lines(run.stderr)).toHaveLength(1);
      expect(run.stderr).toMatch(/DATABASE_URL must be a SQLite file path .*sqlite:<path>.*postgres:\/\//);
      expect(run.stderr).not.toMatch(NO_STACK);
      expect(run.stderr).not.toContain('hunter2');
      // Nothing was created: no SQLite file named after the scheme, no data directory.
      expect(fs.readdirSync(run.cwd)).toEqual([]);
    },
  );

  it.each([
    [{ PORT: 'eighty' }, /PORT must be an integer/],
    [{ REDIS_URL: 'http://cache:6379' }, /REDIS_URL must be redis:\/\//],
    [{ NODE_ENV: 'production', ADMIN_SECRET: '' }, /ADMIN_SECRET is required/],
  ])('a configuration error (%j) is one line on stderr, exit 78', async (env, message) => {
    const run = await runGateway(env);
    expect(run.code).toBe(78);
    expect(lines(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(NO_STACK);
  });

  it('a data directory that cannot be created (a file is in the way) is one line, exit 69', async () => {
    const blocker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-blocker-')), 'not-a-directory');
    fs.writeFileSync(blocker, '');
    const run = await runGateway({ DATABASE_URL: path.join(blocker, 'gateway.db') });
    expect(run.code).toBe(69);
    expect(lines(run.stderr)).toEqual([expect.stringMatching(/^creative-gateway: cannot start: .*not-a-directory/)]);
    expect(run.stderr).not.toMatch(NO_STACK);
  });

  it('a port already in use is one line naming the port, and a non-zero exit', async () => {
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    const port = (squatter.address() as net.AddressInfo).port;
    try {
      // Every secret given, so the only line is the failure (a first start also announces generated keys).
      const run = await runGateway({
        PORT: String(port),
        CF_ACCESS_CLIENT_ID: SERVICE_TOKEN['CF-Access-Client-Id'],
        CF_ACCESS_CLIENT_SECRET: SERVICE_TOKEN['CF-Access-Client-Secret'],
        IMAGE_URL_SIGNING_KEY: 'k'.repeat(32),
        CHANNEL_SEALING_KEY: 'ab'.repeat(32),
      });
      expect(run.code).not.toBe(0);
      expect(run.code).not.toBeNull();
      expect(lines(run.stderr)).toEqual([expect.stringMatching(new RegExp(`127\\.0\\.0\\.1:${port}: the port is already in use`))]);
      expect(run.stderr).not.toMatch(NO_STACK);
    } finally {
      squatter.close();
    }
  });

  it('logs the effective configuration once at startup (at debug; a short summary at info), with every secret masked', async () => {
    const database = await createThrowawayDatabase('sqlite');
    const secrets = { ark: 'ark-api-key-must-not-leak', redis: 'redis-password-must-not-leak', volc: 'volc-secret-must-not-leak' };
    const gateway = await startGatewayProcess({
      DATABASE_URL: database.url,
      REDIS_URL: `redis://:${secrets.redis}@127.0.0.1:1/0`,
      RATE_LIMIT_STORE: 'memory',
      ARK_API_KEY: secrets.ark,
      VOLC_ACCESS_KEY_ID: 'AKLTvisible',
      VOLC_SECRET_ACCESS_KEY: secrets.volc,
      LOG_LEVEL: 'debug',
    });
    try {
      const output = gateway.output.join('');
      expect(lines(output).filter((line) => line.includes('"msg":"configuration"'))).toHaveLength(1);
      const configLines = lines(output).filter((line) => line.includes('"msg":"effective configuration"'));
      expect(configLines).toHaveLength(1);
      const { config } = JSON.parse(configLines[0] as string);
      expect(config).toMatchObject({
        databaseUrl: database.url,
        redisUrl: 'redis://:***@127.0.0.1:1/0',
        adminSecret: '***',
        serviceTokens: [{ clientId: SERVICE_TOKEN['CF-Access-Client-Id'], clientSecret: '***' }],
        bodyLimitBytes: 65536,
        providers: {
          accounts: [
            { format: 'visual', credentials: { access_key_id: 'AKLTvisible', secret_access_key: '***' } },
            { format: 'ark', credentials: { api_key: '***' } },
          ],
        },
      });
      for (const secret of [ADMIN_SECRET, SERVICE_TOKEN['CF-Access-Client-Secret'], ...Object.values(secrets)]) expect(output).not.toContain(secret);
    } finally {
      await gateway.stop();
      await database.drop();
    }
  });
});

describe('operator commands: npm run migrate, npm run backup', () => {
  const npm = (args: string[], env: Record<string, string>) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        'npm',
        ['run', '-s', ...args],
        { cwd: path.resolve(__dirname, '../..'), env: { PATH: process.env.PATH, HOME: process.env.HOME ?? '/tmp', ...env } },
        (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
      );
    });

  it('npm run migrate brings a database to the latest schema without starting the gateway, and refuses unknown schemes', async () => {
    const database = await createThrowawayDatabase('sqlite');
    try {
      const run = await npm(['migrate'], { DATABASE_URL: database.url });
      expect(run).toMatchObject({ code: 0, stderr: '' });
      expect(run.stdout).toContain('is migrated to the latest schema');
      const { default: SQLite } = await import('better-sqlite3');
      const db = new SQLite(database.url, { readonly: true });
      expect((db.prepare('SELECT count(*) AS n FROM kysely_migration').get() as { n: number }).n).toBeGreaterThan(0);
      db.close();
      const wrong = await npm(['migrate'], { DATABASE_URL: 'mysql://db/gateway' });
      expect(wrong.code).toBe(78);
      expect(lines(wrong.stderr)).toEqual([expect.stringMatching(/DATABASE_URL must be/)]);
    } finally {
      await database.drop();
    }
  });

  it('npm run backup copies the SQLite database of a running gateway', async () => {
    const database = await createThrowawayDatabase('sqlite');
    const gateway = await startGatewayProcess({ DATABASE_URL: database.url });
    try {
      const created = await fetch(`${gateway.url}/admin/keys`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${ADMIN_SECRET}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: 'backed up', owner: 'ops@example.com', credits_quota: 1, quota_period_days: 1 }),
      });
      expect(created.status).toBe(201);
      const copy = path.join(path.dirname(database.url), 'backup.db');
      const run = await npm(['backup', '--', copy], { DATABASE_URL: database.url });
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const { default: SQLite } = await import('better-sqlite3');
      const db = new SQLite(copy, { readonly: true });
      expect(db.prepare('SELECT name FROM api_keys').all()).toEqual([{ name: 'backed up' }]);
      db.close();
    } finally {
      await gateway.stop();
      await database.drop();
    }
  });
});
