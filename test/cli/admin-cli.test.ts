import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

const BIN = path.resolve(__dirname, '../../bin/creative-gateway.js');

describe('admin CLI (npx creative-gateway keys ...)', () => {
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

  it('creates, lists, re-quotas, rotates and disables a key', async () => {
    const created = await cli(['keys', 'create', '--name', 'cli', '--owner', 'cli@example.com', '--credits', '2', '--period-days', '7', '--providers', 'local', '--rpm', '9']);
    expect(created.code).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(key).toMatchObject({ name: 'cli', credits_quota: 2, quota_period_days: 7, rate_limit_rpm: 9, allowed_providers: ['local'] });
    expect((await t.api.client(key.key, localRequest())).status).toBe(200);

    const listed = JSON.parse((await cli(['keys', 'list', '--owner', 'cli@example.com'])).stdout);
    expect(listed.data.map((k: { id: string }) => k.id)).toEqual([key.id]);
    expect(JSON.parse((await cli(['keys', 'get', key.id])).stdout)).toMatchObject({ credits_used: 1 });

    const quota = JSON.parse((await cli(['keys', 'quota', key.id, '--credits', '10', '--reset'])).stdout);
    expect(quota).toMatchObject({ credits_quota: 10, credits_used: 0 });
    const rotated = JSON.parse((await cli(['keys', 'rotate', key.id])).stdout);
    expect(rotated.key).not.toBe(key.key);
    const disabled = JSON.parse((await cli(['keys', 'disable', key.id])).stdout);
    expect(disabled.status).toBe('disabled');
    expect((await t.api.client(rotated.key, localRequest())).body.error.code).toBe('key_disabled');
  });

  it('exits 1 with the API error, 2 on a usage error', async () => {
    const wrong = await cli(['keys', 'list'], 'not-the-admin-secret');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('401 invalid_admin_secret');
    const missing = await cli(['keys', 'get', 'key_nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('404 key_not_found');
    const usage = await cli(['keys', 'create', '--name', 'x']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--owner is required');
    expect((await cli(['nonsense'])).stderr).toContain('Usage: creative-gateway keys');
  });
});
