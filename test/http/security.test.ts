import crypto from 'node:crypto';
import { secretsEqual } from '../../src/auth/credentials';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

describe('security', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ LOG_LEVEL: 'trace' });
  });
  afterAll(() => t.close());

  it('no key value or admin secret in logs, and no secret in any response but create/rotate', async () => {
    const { id, key } = await t.createKey({ credits_quota: 1 });
    const bodies: string[] = [];
    bodies.push((await t.api.client(key, localRequest())).text);
    bodies.push((await t.api.client(key, localRequest())).text); // 402
    bodies.push((await t.api.client(`${key}x`, localRequest())).text);
    bodies.push((await t.api.admin('get', `/admin/keys/${id}`)).text);
    bodies.push((await t.api.admin('get', '/admin/keys')).text);
    const rotated = (await t.api.admin('post', `/admin/keys/${id}/rotate`)).body.key as string;
    bodies.push((await t.api.admin('delete', `/admin/keys/${id}`)).text);
    const logs = t.logs.join('\n');
    expect(t.logs.length).toBeGreaterThan(5);
    for (const secret of [key, rotated, ADMIN_SECRET]) {
      expect(logs).not.toContain(secret);
      for (const body of bodies) expect(body).not.toContain(secret);
    }
    expect(logs).toContain(id);
  });

  it('500s carry no stack trace', async () => {
    const { key } = await t.createKey();
    // Break the database under the gateway to force an unexpected error.
    await t.gateway.database.db.schema.alterTable('generations').renameTo('generations_moved').execute();
    try {
      const res = await t.api.client(key, localRequest());
      expect(res.status).toBe(500);
      expect(res.body.error.code).toBe('internal_error');
      expect(res.text).not.toMatch(/at .*\.(ts|js):\d+/);
      expect(res.text).not.toContain('generations');
    } finally {
      await t.gateway.database.db.schema.alterTable('generations_moved').renameTo('generations').execute();
    }
  });

  it('compares the admin secret in constant time, whatever the length of the guess', async () => {
    const spy = jest.spyOn(crypto, 'timingSafeEqual');
    try {
      for (const guess of ['x', ADMIN_SECRET.slice(0, -1), `${ADMIN_SECRET}-longer`]) {
        spy.mockClear();
        const res = await t.api.send('get', '/admin/keys', { headers: { Authorization: `Bearer ${guess}` } });
        expect(res.status).toBe(401);
        // Equal-length digests are compared, so the comparison cannot end early or leak the length.
        expect(spy).toHaveBeenCalledTimes(1);
        const [a, b] = spy.mock.calls[0] as [Buffer, Buffer];
        expect([a.length, b.length]).toEqual([32, 32]);
      }
    } finally {
      spy.mockRestore();
    }
    expect(secretsEqual('same', 'same')).toBe(true);
    expect(secretsEqual('same', 'Same')).toBe(false);
  });
});
