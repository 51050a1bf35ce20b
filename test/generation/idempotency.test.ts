import type { FakeImagesApi } from '../fakes/fake-images-api';
import { startArkGateway } from '../helpers/ark-gateway';
import { ADMIN_SECRET, type TestGateway, localRequest } from '../helpers/test-gateway';
import { until } from '../helpers/until';

describe('Idempotency-Key', () => {
  let ark: FakeImagesApi;
  let t: TestGateway;
  beforeAll(async () => {
    ({ t, ark } = await startArkGateway());
  });
  afterAll(() => t.close());

  const generate = (key: string, idem: string, body: Record<string, unknown>) =>
    t.api.send('post', '/images/generate', { body, headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': idem } });
  const used = (id: string) => t.api.creditsUsed(id);

  it('a retry with the same key and body replays the first response and charges once', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const first = await generate(key, 'order-1', localRequest({ n: 2 }));
    const retry = await generate(key, 'order-1', localRequest({ n: 2 }));
    expect(first.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(await used(id)).toBe(2);
  });

  it("a replay carries the key's rate-limit state, looked up: the replay is not counted", async () => {
    const { key } = await t.createKey({ rate_limit_rpm: 5 });
    const first = await generate(key, 'limited-1', localRequest());
    const retry = await generate(key, 'limited-1', localRequest());
    const state = (res: typeof first) => [res.headers['ratelimit-policy'], res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining']];
    expect(state(first)).toEqual(['"rpm";q=5;w=60', '5', '4']);
    expect([retry.headers['idempotent-replayed'], ...state(retry)]).toEqual(['true', '"rpm";q=5;w=60', '5', '4']);
    expect(retry.headers['ratelimit']).toMatch(/^"rpm";r=4;t=\d+$/);
  });

  it('the same key with a different body is 422 idempotency_key_reused', async () => {
    const { id, key } = await t.createKey();
    await generate(key, 'order-2', localRequest());
    const res = await generate(key, 'order-2', localRequest({ prompt: 'something else' }));
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'idempotency_key_reused', param: 'Idempotency-Key' });
    expect(await used(id)).toBe(1);
  });

  it('the same key and body asked synchronously and asynchronously is 422, not a replay of the other form (issue #29 §8)', async () => {
    const { id, key } = await t.createKey();
    const send = (idem: string, prefer?: string) =>
      t.api.send('post', '/images/generate', {
        body: localRequest(),
        headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': idem, ...(prefer ? { Prefer: prefer } : {}) },
      });
    expect((await send('mode-1', 'respond-async')).status).toBe(202);
    const sync = await send('mode-1');
    expect([sync.status, sync.body.error?.code]).toEqual([422, 'idempotency_key_reused']);
    expect((await send('mode-2')).status).toBe(200);
    for (const prefer of ['respond-async', 'wait=5']) {
      const async = await send('mode-2', prefer);
      expect([prefer, async.status, async.body.error?.code]).toEqual([prefer, 422, 'idempotency_key_reused']);
    }
    // The same form still replays.
    const again = await send('mode-1', 'respond-async');
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([202, 'true']);
    expect((await send('mode-2')).headers['idempotent-replayed']).toBe('true');
    expect(await used(id)).toBe(2);
  });

  it('a retry while the first is still running is 409 idempotency_key_in_use', async () => {
    const { key } = await t.createKey({ allowed_providers: ['jimeng'] });
    const body = { prompt: 'held until released [hold]', model: 'jimeng-4.5' };
    const first = generate(key, 'order-3', body);
    await until(() => ark.requests.some((r) => r.prompt === body.prompt), 'the first request upstream');
    const second = await generate(key, 'order-3', body);
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('idempotency_key_in_use');
    ark.releaseHeld();
    expect((await first).status).toBe(200);
    expect((await generate(key, 'order-3', body)).headers['idempotent-replayed']).toBe('true');
  });

  it('is scoped to the caller: another key may use the same Idempotency-Key', async () => {
    const a = await t.createKey();
    const b = await t.createKey();
    const ra = await generate(a.key, 'shared-name', localRequest());
    const rb = await generate(b.key, 'shared-name', localRequest());
    expect(ra.body.id).not.toBe(rb.body.id);
    expect(await used(a.id)).toBe(1);
    expect(await used(b.id)).toBe(1);
  });

  it('a refused-for-rate-limit outcome is not kept: the retry runs again', async () => {
    const { key } = await t.createKey({ rate_limit_rpm: 1 });
    expect((await t.api.client(key, localRequest())).status).toBe(200);
    expect((await generate(key, 'order-4', localRequest())).status).toBe(429);
    t.clock.advanceMs(61_000);
    expect((await generate(key, 'order-4', localRequest())).status).toBe(200);
  });

  it('records are kept 24 h, then the key may be used afresh', async () => {
    const { id, key } = await t.createKey();
    await generate(key, 'order-5', localRequest());
    t.clock.advanceMs(23 * 3_600_000);
    expect((await generate(key, 'order-5', localRequest())).headers['idempotent-replayed']).toBe('true');
    t.clock.advanceMs(2 * 3_600_000);
    expect((await generate(key, 'order-5', localRequest())).headers['idempotent-replayed']).toBeUndefined();
    expect(await used(id)).toBe(2);
  });

  it('POST /admin/keys: a retry returns the same key (secret included) and creates nothing new', async () => {
    const body = { name: 'idem', owner: `idem-${Date.now()}`, credits_quota: 1, quota_period_days: 1 };
    const headers = { Authorization: `Bearer ${ADMIN_SECRET}`, 'Idempotency-Key': 'create-1' };
    const first = await t.api.send('post', '/admin/keys', { body, headers });
    const retry = await t.api.send('post', '/admin/keys', { body, headers });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(first.body.id);
    expect(retry.headers.location).toBe(first.headers.location);
    expect(retry.body.key).toBe(first.body.key);
    // The stored copy is sealed: the secret is nowhere readable in the database.
    const stored = await t.gateway.database.db.selectFrom('idempotency_keys').selectAll().where('idempotency_key', '=', 'create-1').execute();
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(first.body.key);
    expect(JSON.stringify(stored)).not.toContain(first.body.key.slice(5, 20));
    const listed = await t.api.admin('get', `/admin/keys?owner=${body.owner}`);
    expect(listed.body.data).toHaveLength(1);
    const other = await t.api.send('post', '/admin/keys', { body: { ...body, name: 'other' }, headers });
    expect(other.status).toBe(422);
  });

  it('an invalid request stores nothing', async () => {
    const { key } = await t.createKey();
    expect((await generate(key, 'order-6', { model: 'local-1' })).status).toBe(400);
    expect((await generate(key, 'order-6', localRequest())).status).toBe(200);
  });
});
