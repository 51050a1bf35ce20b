import { type Books, type BooksGateway, ONE_BACKGROUND_RUN, startBooksGateway } from '../helpers/books';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Every key's generations for administrators (listAdminGenerations, getAdminGeneration,
 * cancelAdminGeneration). `held-1` runs on the fake Ark API, whose `[hold:TAG]` prompts wait for
 * releaseHeld(TAG); one background run at a time keeps a second submission queued.
 */
describe('admin generations (GET /admin/generations, GET /admin/generations/{id}, POST /admin/generations/{id}/cancel)', () => {
  let booksGateway: BooksGateway;
  let t: TestGateway;
  let ark: FakeImagesApi;
  let books: Books;

  beforeAll(async () => {
    booksGateway = await startBooksGateway(ONE_BACKGROUND_RUN);
    ({ t, ark, books } = booksGateway);
  });
  afterAll(() => booksGateway.close());

  const admin = bearer(ADMIN_SECRET);
  const newKey = async (quota = 10) => t.createKey({ credits_quota: quota, allowed_providers: ['local', 'jimeng'] });
  const submit = (key: string, body: Record<string, unknown>) =>
    t.api.send('post', '/images/generate', { body, headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' } });
  const adminGet = (path: string, headers: Record<string, string> = admin) => t.api.send('get', path, { headers });
  const adminCancel = (id: string, headers: Record<string, string> = admin) => t.api.send('post', `/admin/generations/${id}/cancel`, { headers });
  const statusOf = async (id: string) => (await adminGet(`/admin/generations/${id}`)).body.status as string;
  const ids = (res: { body: { data: Array<{ id: string }> } }) => res.body.data.map((g) => g.id);

  it("lists every key's generations newest first with key_id, filtered by key, status, model and creation time, a page at a time", async () => {
    const a = await newKey();
    const b = await newKey();
    const first = await submit(a.key, { prompt: 'x', model: 'local-1', response_format: 'url' });
    const second = await submit(b.key, { prompt: 'y', model: 'local-1' });
    const third = await submit(a.key, { prompt: 'z', model: 'local-1' });
    for (const g of [first, second, third]) await until(async () => (await statusOf(g.body.id)) === 'succeeded', 'the generations to succeed');

    const all = await adminGet('/admin/generations?limit=100');
    expect(all.status).toBe(200);
    expect(ids(all)).toEqual(expect.arrayContaining([first.body.id, second.body.id, third.body.id]));
    expect(ids(all).indexOf(third.body.id)).toBeLessThan(ids(all).indexOf(first.body.id));
    expect(all.body.data.find((g: { id: string }) => g.id === second.body.id)).toMatchObject({ key_id: b.id, status: 'succeeded', object: 'generation' });

    const ofA = await adminGet(`/admin/generations?key_id=${a.id}&limit=1`);
    expect(ids(ofA)).toEqual([third.body.id]);
    const next = await adminGet(`/admin/generations?key_id=${a.id}&limit=1&cursor=${ofA.body.next_cursor}`);
    expect(ids(next)).toEqual([first.body.id]);
    expect(next.body.data[0].data[0].url).toMatch(/\/images\/img_/);
    expect(next.body.next_cursor).toBeNull();

    expect((await adminGet(`/admin/generations?key_id=${a.id}&status=failed`)).body.data).toEqual([]);
    expect((await adminGet(`/admin/generations?key_id=${a.id}&model=held-1`)).body.data).toEqual([]);
    expect(ids(await adminGet(`/admin/generations?key_id=${b.id}&model=local-1&status=succeeded`))).toEqual([second.body.id]);
    const createdAt = Date.parse(second.body.created_at as string);
    const after = await adminGet(`/admin/generations?key_id=${b.id}&created_after=${new Date(createdAt + 1).toISOString()}`);
    expect([after.status, after.body]).toEqual([200, { data: [], next_cursor: null }]);
    expect(ids(await adminGet(`/admin/generations?key_id=${b.id}&created_before=${new Date(createdAt + 1).toISOString()}`))).toEqual([second.body.id]);
  });

  it("gets any key's generation with its key; 404 generation_not_found for an unknown one", async () => {
    const key = await newKey();
    const made = await submit(key.key, { prompt: 'g', model: 'local-1' });
    await until(async () => (await statusOf(made.body.id)) === 'succeeded', 'the generation to succeed');
    const res = await adminGet(`/admin/generations/${made.body.id}`);
    expect(res.status).toBe(200);
    const asHolder = await t.api.send('get', `/generations/${made.body.id}`, { headers: bearer(key.key) });
    expect({ ...res.body, data: null }).toEqual({ ...asHolder.body, data: null, key_id: key.id });
    const missing = await adminGet('/admin/generations/gen_missing0');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('generation_not_found');
    expect((await adminCancel('gen_missing0')).body.error.code).toBe('generation_not_found');
  });

  it('cancels a queued one (released) and a running one that sent its call (charged), audited; a settled one is 409', async () => {
    const key = await newKey(5);
    const running = await submit(key.key, { prompt: 'r [hold:ac1]', model: 'held-1' });
    await ark.whenHeld('ac1');
    const queued = await submit(key.key, { prompt: 'q [hold:ac2]', model: 'held-1' });
    expect(await statusOf(queued.body.id)).toBe('queued');

    const canceledQueued = await adminCancel(queued.body.id);
    expect(canceledQueued.status).toBe(200);
    expect(canceledQueued.body).toMatchObject({
      key_id: key.id,
      status: 'canceled',
      error: { code: 'canceled' },
      usage: { credits_reserved: 0, credits_charged: 0 },
    });
    expect(canceledQueued.body.error.message).toMatch(/^Canceled by an administrator/);
    const canceledRunning = await adminCancel(running.body.id);
    expect(canceledRunning.body).toMatchObject({ status: 'canceled', usage: { credits_reserved: 0, credits_charged: 1 } });
    ark.releaseHeld('ac1');

    const again = await adminCancel(running.body.id);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('generation_finished');
    // The key holder sees the same settled generation.
    expect((await t.api.send('post', `/generations/${running.body.id}/cancel`, { headers: bearer(key.key) })).status).toBe(409);
    expect(ark.requests.filter((r) => String(r.prompt).includes('[hold:ac2]'))).toHaveLength(0);
    expect(await t.api.creditsUsed(key.id)).toBe(1);
    expect(await books.violations({ settled: true })).toEqual([]);

    const events = await t.api.admin('get', `/admin/audit-events?action=generation.canceled&target=${running.body.id}`);
    expect(events.body.data).toEqual([
      expect.objectContaining({
        actor: 'root',
        action: 'generation.canceled',
        target: running.body.id,
        before: { status: 'running' },
        after: { status: 'canceled', credits_charged: 1 },
      }),
    ]);
    // The refused second cancel left no event.
    const queuedEvents = await t.api.admin('get', `/admin/audit-events?action=generation.canceled&target=${queued.body.id}`);
    expect(queuedEvents.body.data).toHaveLength(1);
  });

  it('400 for a malformed id, filter or cursor', async () => {
    for (const path of [
      '/admin/generations/not-an-id',
      '/admin/generations?key_id=nope',
      '/admin/generations?status=lost',
      '/admin/generations?created_after=yesterday',
      '/admin/generations?limit=0',
      '/admin/generations?cursor=bm9wZQ',
    ]) {
      const res = await adminGet(path);
      expect([path, res.status, res.body.error.code]).toEqual([path, 400, 'invalid_request']);
    }
    expect((await adminCancel('not-an-id')).status).toBe(400);
  });

  it('401 without an admin credential or with a client key; 403 insufficient_scope without generations:read / generations:write', async () => {
    const key = await newKey();
    const made = await submit(key.key, { prompt: 'auth', model: 'local-1' });
    for (const headers of [{}, bearer(key.key)]) {
      expect((await adminGet('/admin/generations', headers)).status).toBe(401);
      expect((await adminGet(`/admin/generations/${made.body.id}`, headers)).status).toBe(401);
      expect((await adminCancel(made.body.id, headers)).status).toBe(401);
    }
    const keysReader = bearer((await createAdminTokenVia(t.api, ['keys:read'])).token);
    const reader = bearer((await createAdminTokenVia(t.api, ['generations:read'])).token);
    const writer = bearer((await createAdminTokenVia(t.api, ['generations:write'])).token);
    for (const res of [
      await adminGet('/admin/generations', keysReader),
      await adminGet(`/admin/generations/${made.body.id}`, writer),
      await adminCancel(made.body.id, reader),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('insufficient_scope');
    }
    expect((await adminGet('/admin/generations', reader)).status).toBe(200);
    expect((await adminGet(`/admin/generations/${made.body.id}`, reader)).status).toBe(200);
    await until(async () => (await statusOf(made.body.id)) === 'succeeded', 'the generation to succeed');
    // The writer passes the guard: the generation has settled, so 409.
    expect((await adminCancel(made.body.id, writer)).status).toBe(409);
  });
});
