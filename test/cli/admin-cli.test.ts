import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

const BIN = path.resolve(__dirname, '../../bin/creative-gateway.js');

describe('admin CLI (npx creative-gateway ...), the real bin against a real gateway', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  /** Runs the real bin script (asynchronously: the gateway answering it lives in this process). */
  async function cli(args: string[], secret = ADMIN_SECRET): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...args], {
        env: { PATH: process.env.PATH, GATEWAY_URL: t.gateway.url, ADMIN_SECRET: secret },
      });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }
  const json = async (args: string[]) => {
    const result = await cli([...args, '--json']);
    if (result.code !== 0) throw new Error(`${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return JSON.parse(result.stdout);
  };

  it.each([[['--help']], [['-h']], [['keys', '--help']], [['keys', 'create', '-h']], [['keys', 'update', '--help']]])(
    '%j prints help on stdout and exits 0',
    async (args) => {
      const result = await cli(args);
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(result.stdout).toMatch(/^Usage: creative-gateway/);
    },
  );

  it('--version prints the package version and exits 0', async () => {
    expect(await cli(['--version'])).toEqual({ code: 0, stdout: `${require('../../package.json').version}\n`, stderr: '' });
  });

  it.each([
    [[], /Usage: creative-gateway/],
    [['--bogus'], /unknown option '--bogus'/],
    [['nonsense'], /unknown command 'nonsense'/],
    [['keys', 'get'], /missing required argument 'id'/],
    [['keys', 'create', '--name', 'x'], /required option '--owner <owner>' not specified/],
    [['keys', 'list', '--limit', 'ten'], /'ten' is invalid/],
    [['keys', 'update', 'key_x'], /nothing to change/],
  ])('usage error %j: message on stderr, nothing on stdout, exit 2', async (args, message) => {
    const result = await cli(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
  });

  it("API errors exit 1 with the API's code and message on stderr", async () => {
    const wrong = await cli(['keys', 'list'], 'not-the-admin-secret');
    expect(wrong).toMatchObject({ code: 1, stdout: '' });
    expect(wrong.stderr).toContain('401 invalid_admin_secret');
    const missing = await cli(['keys', 'get', 'key_nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('404 key_not_found');
  });

  it('every key operation: create, list, get, update, disable, enable, quota, rotate (--json)', async () => {
    const key = await json([
      'keys',
      'create',
      '--name',
      'cli',
      '--owner',
      'cli@example.com',
      '--credits',
      '2',
      '--period-days',
      '7',
      '--providers',
      'local',
      '--rpm',
      '9',
    ]);
    expect(key).toMatchObject({ name: 'cli', credits_quota: 2, quota_period_days: 7, rate_limit_rpm: 9, allowed_providers: ['local'] });
    expect((await t.api.client(key.key, localRequest())).status).toBe(200);

    expect((await json(['keys', 'list', '--owner', 'cli@example.com'])).data.map((k: { id: string }) => k.id)).toEqual([key.id]);
    expect(await json(['keys', 'get', key.id])).toMatchObject({ credits_used: 1 });

    const updated = await json(['keys', 'update', key.id, '--name', 'renamed', '--rpm', '20', '--expires-at', '2099-01-01T00:00:00Z']);
    expect(updated).toMatchObject({ name: 'renamed', rate_limit_rpm: 20, expires_at: '2099-01-01T00:00:00.000Z' });
    expect((await json(['keys', 'disable', key.id])).status).toBe('disabled');
    expect((await t.api.client(key.key, localRequest())).body.error.code).toBe('key_disabled');
    expect((await json(['keys', 'update', key.id, '--enable'])).status).toBe('active');
    expect((await json(['keys', 'disable', key.id])).status).toBe('disabled');
    expect((await json(['keys', 'enable', key.id])).status).toBe('active');
    expect((await t.api.client(key.key, localRequest())).status).toBe(200);

    expect(await json(['keys', 'quota', key.id, '--credits', '10', '--reset'])).toMatchObject({ credits_quota: 10, credits_used: 0 });
    const rotated = await json(['keys', 'rotate', key.id]);
    expect(rotated.key).not.toBe(key.key);
    expect((await t.api.client(key.key, localRequest())).body.error.code).toBe('invalid_api_key');
  });

  it('prints a readable table for list and fields for one key by default', async () => {
    const created = await cli(['keys', 'create', '--name', 'table me', '--owner', 'table@example.com', '--credits', '5', '--period-days', '30']);
    expect(created.code).toBe(0);
    const secret = /^key: (hyai_\w+)$/m.exec(created.stdout)?.[1];
    expect(secret).toMatch(/^hyai_/);
    const id = /^id:\s+(key_\w+)$/m.exec(created.stdout)?.[1] as string;

    const list = await cli(['keys', 'list', '--owner', 'table@example.com']);
    expect(list.code).toBe(0);
    const [heading, row, ...rest] = list.stdout.trimEnd().split('\n');
    expect(heading).toMatch(/^ID\s+NAME\s+OWNER\s+STATUS\s+CREDITS\s+PERIOD\s+RPM\s+PROVIDERS\s+EXPIRES$/);
    expect(row).toMatch(new RegExp(`^${id}\\s+table me\\s+table@example.com\\s+active\\s+0/5\\s+30d\\s+\\d+\\s+\\S+\\s+-$`));
    expect(rest).toEqual([]);
    expect(list.stdout).not.toContain(secret);

    const one = await cli(['keys', 'get', id]);
    expect(one.stdout).toMatch(/^status:\s+active$/m);
    expect(one.stdout).not.toContain(secret);
  });
});
