import { createHash } from 'node:crypto';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

const validKey = { name: 'design', owner: 'design@example.com', credits_quota: 100, quota_period_days: 30 };

describe('admin keys API', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  describe('POST /admin/keys (createKey)', () => {
    it('201 with Location, the secret once, and the documented defaults', async () => {
      const res = await t.api.admin('post', '/admin/keys', validKey);
      expect(res.status).toBe(201);
      expect(res.headers.location).toBe(`/admin/keys/${res.body.id}`);
      expect(res.body.id).toMatch(/^key_[0-9A-Za-z]{22}$/);
      expect(res.body.key).toMatch(/^hyai_[0-9A-Za-z]{36}$/);
      expect(res.body).toMatchObject({
        ...validKey,
        status: 'active',
        credits_used: 0,
        credits_remaining: 100,
        rate_limit_rpm: 30,
        allowed_providers: ['jimeng'],
        expires_at: null,
        disabled_at: null,
        last_used_at: null,
      });
      expect(res.body.hint).toBe(`${res.body.key.slice(0, 9)}...${res.body.key.slice(-4)}`);
      expect(Date.parse(res.body.period_resets_at) - Date.parse(res.body.period_started_at)).toBe(30 * 86_400_000);
    });

    it('stores only the SHA-256 of the secret', async () => {
      const res = await t.api.admin('post', '/admin/keys', validKey);
      const row = await t.gateway.database.db.selectFrom('api_keys').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
      expect(row.key_hash).toBe(createHash('sha256').update(res.body.key).digest('hex'));
      expect(JSON.stringify(row)).not.toContain(res.body.key);
    });

    it('accepts expires_in_days and expires_at', async () => {
      const inDays = await t.api.admin('post', '/admin/keys', { ...validKey, expires_in_days: 2 });
      expect(Date.parse(inDays.body.expires_at) - Date.parse(inDays.body.created_at)).toBe(2 * 86_400_000);
      const at = new Date(Date.now() + 3_600_000).toISOString();
      const explicit = await t.api.admin('post', '/admin/keys', { ...validKey, expires_at: at });
      expect(explicit.status).toBe(201);
      expect(explicit.body.expires_at).toBe(at);
    });

    it.each([
      [{ ...validKey, expires_at: new Date(Date.now() + 3_600_000).toISOString(), expires_in_days: 1 }, 'expires_at'],
      [{ ...validKey, expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [{ ...validKey, expires_at: 'tomorrow' }, 'expires_at'],
      [{ ...validKey, allowed_providers: ['nope'] }, 'allowed_providers'],
      [{ ...validKey, allowed_providers: [] }, 'allowed_providers'],
      [{ ...validKey, allowed_providers: ['local', 'local'] }, 'allowed_providers'],
      [{ ...validKey, credits_quota: -1 }, 'credits_quota'],
      [{ ...validKey, quota_period_days: 0 }, 'quota_period_days'],
      [{ ...validKey, rate_limit_rpm: 0 }, 'rate_limit_rpm'],
      [{ ...validKey, color: 'blue' }, 'color'],
      [{ owner: 'x', credits_quota: 1, quota_period_days: 1 }, 'name'],
    ])('400 invalid_request for %j', async (body, param) => {
      const res = await t.api.admin('post', '/admin/keys', body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    });
  });

  describe('GET /admin/keys (listKeys)', () => {
    it('pages newest first with a cursor and filters by owner and status', async () => {
      const owner = `pager-${Date.now()}@example.com`;
      const ids: string[] = [];
      for (let i = 0; i < 5; i += 1) {
        ids.push((await t.api.admin('post', '/admin/keys', { ...validKey, owner, name: `k${i}` })).body.id);
        t.clock.advanceMs(5);
      }
      await t.api.admin('delete', `/admin/keys/${ids[1]}`);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { status: number; body: { data: Array<{ id: string; key?: string }>; next_cursor: string | null } } = await t.api.admin(
          'get',
          `/admin/keys?owner=${encodeURIComponent(owner)}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        );
        expect(page.status).toBe(200);
        expect(page.body.data.length).toBeLessThanOrEqual(2);
        for (const key of page.body.data) expect(key.key).toBeUndefined();
        seen.push(...page.body.data.map((k) => k.id));
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(seen).toEqual([...ids].reverse());

      const disabled = await t.api.admin('get', `/admin/keys?owner=${encodeURIComponent(owner)}&status=disabled`);
      expect(disabled.body.data.map((k: { id: string }) => k.id)).toEqual([ids[1]]);
      const active = await t.api.admin('get', `/admin/keys?owner=${encodeURIComponent(owner)}&status=active`);
      expect(active.body.data).toHaveLength(4);
    });

    it('filters expired keys', async () => {
      const owner = `expiry-${Date.now()}@example.com`;
      const soon = await t.api.admin('post', '/admin/keys', { ...validKey, owner, expires_in_days: 1 });
      await t.api.admin('post', '/admin/keys', { ...validKey, owner });
      t.clock.advanceDays(2);
      const expired = await t.api.admin('get', `/admin/keys?owner=${encodeURIComponent(owner)}&status=expired`);
      expect(expired.body.data.map((k: { id: string; status: string }) => [k.id, k.status])).toEqual([[soon.body.id, 'expired']]);
    });

    it('400 for a bad cursor, limit or status', async () => {
      for (const query of ['cursor=garbage', 'limit=0', 'limit=101', 'status=sleeping', 'unknown=1']) {
        const res = await t.api.admin('get', `/admin/keys?${query}`);
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
      }
    });
  });

  describe('GET /admin/keys/{id} (getKey)', () => {
    it('200 with usage in the current period and no secret', async () => {
      const { id, key } = await t.createKey({ credits_quota: 10 });
      await t.api.client(key, localRequest({ n: 3 }));
      const res = await t.api.admin('get', `/admin/keys/${id}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id, credits_quota: 10, credits_used: 3, credits_remaining: 7 });
      expect(JSON.stringify(res.body)).not.toContain(key);
    });

    it('404 key_not_found and 400 for a malformed id', async () => {
      const missing = await t.api.admin('get', '/admin/keys/key_doesnotexist');
      expect(missing.status).toBe(404);
      expect(missing.body.error).toMatchObject({ code: 'key_not_found', param: 'id' });
      const malformed = await t.api.admin('get', '/admin/keys/not-a-key-id');
      expect(malformed.status).toBe(400);
    });
  });

  describe('PATCH /admin/keys/{id} (updateKey)', () => {
    it('updates fields, re-enables and clears expiry', async () => {
      const { id, key } = await t.createKey({ expires_in_days: 5 });
      await t.api.admin('delete', `/admin/keys/${id}`);
      const changes = { name: 'renamed', owner: 'new-owner', rate_limit_rpm: 7, allowed_providers: ['local', 'jimeng'], expires_at: null, status: 'active' };
      const res = await t.api.admin('patch', `/admin/keys/${id}`, changes);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ ...changes, disabled_at: null });
      const used = await t.api.client(key, localRequest());
      expect(used.status).toBe(200);
      expect(used.headers['x-ratelimit-limit']).toBe('7');
    });

    it('takes allowed_providers away from the next request on', async () => {
      const { id, key } = await t.createKey();
      await t.api.admin('patch', `/admin/keys/${id}`, { allowed_providers: ['jimeng'] });
      expect((await t.api.client(key, localRequest())).body.error.code).toBe('provider_not_allowed');
    });

    it('can disable through status', async () => {
      const { id, key } = await t.createKey();
      const res = await t.api.admin('patch', `/admin/keys/${id}`, { status: 'disabled' });
      expect(res.body.status).toBe('disabled');
      expect((await t.api.client(key, localRequest())).body.error.code).toBe('key_disabled');
    });

    it('400 for an empty body, a past expiry or an unknown provider; 404 for an unknown id', async () => {
      const { id } = await t.createKey();
      for (const [body, param] of [
        [{}, null],
        [{ expires_at: '2000-01-01T00:00:00Z' }, 'expires_at'],
        [{ allowed_providers: ['nope'] }, 'allowed_providers'],
        [{ status: 'expired' }, 'status'],
        [{ key_hash: 'x' }, 'key_hash'],
      ] as const) {
        const res = await t.api.admin('patch', `/admin/keys/${id}`, body);
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
        if (param) expect(res.body.error.param).toBe(param);
      }
      expect((await t.api.admin('patch', '/admin/keys/key_missing', { name: 'x' })).status).toBe(404);
    });
  });

  describe('DELETE /admin/keys/{id} (disableKey)', () => {
    it('disables idempotently and keeps the record', async () => {
      const { id } = await t.createKey();
      const first = await t.api.admin('delete', `/admin/keys/${id}`);
      expect(first.status).toBe(200);
      expect(first.body.status).toBe('disabled');
      expect(first.body.disabled_at).not.toBeNull();
      const second = await t.api.admin('delete', `/admin/keys/${id}`);
      expect(second.status).toBe(200);
      expect(second.body.disabled_at).toBe(first.body.disabled_at);
      expect((await t.api.admin('get', `/admin/keys/${id}`)).body.status).toBe('disabled');
    });

    it('404 for an unknown id', async () => {
      const res = await t.api.admin('delete', '/admin/keys/key_missing');
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('key_not_found');
    });
  });

  describe('POST /admin/keys/{id}/quota (setKeyQuota)', () => {
    it('raises the quota immediately, keeping usage', async () => {
      const { id, key } = await t.createKey({ credits_quota: 1 });
      expect((await t.api.client(key, localRequest())).status).toBe(200);
      expect((await t.api.client(key, localRequest())).status).toBe(402);
      const res = await t.api.admin('post', `/admin/keys/${id}/quota`, { credits_quota: 3 });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ credits_quota: 3, credits_used: 1, credits_remaining: 2 });
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
      expect((await t.api.client(key, localRequest())).status).toBe(402);
    });

    it('reset_usage starts the period usage from zero; a new period length re-anchors the period', async () => {
      const { id, key } = await t.createKey({ credits_quota: 2, quota_period_days: 30 });
      await t.api.client(key, localRequest({ n: 2 }));
      const reset = await t.api.admin('post', `/admin/keys/${id}/quota`, { credits_quota: 2, reset_usage: true, quota_period_days: 7 });
      expect(reset.body).toMatchObject({ credits_used: 0, credits_remaining: 2, quota_period_days: 7 });
      expect(Date.parse(reset.body.period_resets_at) - Date.parse(reset.body.period_started_at)).toBe(7 * 86_400_000);
      expect((await t.api.client(key, localRequest())).status).toBe(200);
    });

    it('400 for a negative quota, 404 for an unknown id', async () => {
      const { id } = await t.createKey();
      const bad = await t.api.admin('post', `/admin/keys/${id}/quota`, { credits_quota: -5 });
      expect(bad.status).toBe(400);
      expect(bad.body.error.param).toBe('credits_quota');
      expect((await t.api.admin('post', '/admin/keys/key_missing/quota', { credits_quota: 5 })).status).toBe(404);
    });
  });

  describe('POST /admin/keys/{id}/rotate (rotateKey)', () => {
    it('returns a new secret once; the old one is refused, settings and usage kept', async () => {
      const { id, key } = await t.createKey({ credits_quota: 5 });
      await t.api.client(key, localRequest());
      const res = await t.api.admin('post', `/admin/keys/${id}/rotate`);
      expect(res.status).toBe(200);
      expect(res.body.key).toMatch(/^hyai_/);
      expect(res.body.key).not.toBe(key);
      expect(res.body).toMatchObject({ id, credits_used: 1, credits_quota: 5 });
      expect((await t.api.client(key, localRequest())).body.error.code).toBe('invalid_api_key');
      expect((await t.api.client(res.body.key, localRequest())).status).toBe(200);
    });

    it('404 for an unknown id', async () => {
      expect((await t.api.admin('post', '/admin/keys/key_missing/rotate')).status).toBe(404);
    });
  });

  describe('admin auth on every admin operation', () => {
    const operations: Array<['get' | 'post' | 'patch' | 'delete', string, unknown]> = [
      ['post', '/admin/keys', validKey],
      ['get', '/admin/keys', undefined],
      ['get', '/admin/keys/key_x', undefined],
      ['patch', '/admin/keys/key_x', { name: 'x' }],
      ['delete', '/admin/keys/key_x', undefined],
      ['post', '/admin/keys/key_x/quota', { credits_quota: 1 }],
      ['post', '/admin/keys/key_x/rotate', undefined],
    ];

    it.each(operations)('%s %s: 401 without, with a wrong secret, or with a client key', async (method, path, body) => {
      const { key } = await t.createKey();
      for (const headers of [
        {} as Record<string, string>,
        { Authorization: `Bearer ${ADMIN_SECRET}x` },
        { Authorization: `Bearer ${key}` },
        { Authorization: ADMIN_SECRET },
      ]) {
        const res = await t.api.send(method, path, { body, headers });
        expect(res.status).toBe(401);
        expect(res.body.error).toMatchObject({ code: 'invalid_admin_secret', type: 'authentication_error' });
      }
    });
  });
});
