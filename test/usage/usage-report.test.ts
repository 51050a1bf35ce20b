import { type Books, type BooksGateway, ONE_BACKGROUND_RUN, UPSTREAM_REFUSAL, startBooksGateway } from '../helpers/books';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import type { TestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import type { components } from '../../generated/gateway';
import type { GenerationsTable } from '../../src/db/schema';
import { findGeneration } from '../../src/generation/generations.repository';
import { refundUnsentCalls } from '../../src/generation/settlement.repository';
import { bucketStartOf } from '../../src/usage/usage-query';

const HOUR = 3_600_000;
const DAY = 86_400_000;

type UsageRow = components['schemas']['UsageReportRow'];

/**
 * Issue #28 §1: usage analytics from rollups kept with the books. The mixed run covers every
 * path that settles a key's charge: synchronous and asynchronous successes, an upstream failure
 * (refunded), a cancel of a queued and of a running asynchronous generation, a cancel of a
 * synchronous one while its client waits, and a client that disconnects after its call was sent.
 */
describe('usage analytics (GET /admin/usage, getUsageReport)', () => {
  let booksGateway: BooksGateway;
  let t: TestGateway;
  let ark: FakeImagesApi;
  let books: Books;
  const keys: Record<'alice1' | 'alice2' | 'bob', { id: string; key: string }> = {} as never;
  let twoImagesId = '';

  beforeAll(async () => {
    booksGateway = await startBooksGateway(ONE_BACKGROUND_RUN);
    ({ t, ark, books } = booksGateway);
    const create = (owner: string, team: string) => t.createKey({ owner, credits_quota: 100, allowed_providers: ['local', 'jimeng'], metadata: { team } });
    keys.alice1 = await create('alice@example.com', 'design');
    keys.alice2 = await create('alice@example.com', 'ops');
    keys.bob = await create('bob@example.com', 'design');
    await mixedRun();
  });
  afterAll(() => booksGateway.close());

  const submit = (key: string, body: Record<string, unknown>, prefer?: string) =>
    t.api.send('post', '/images/generate', { body, headers: { Authorization: `Bearer ${key}`, ...(prefer ? { Prefer: prefer } : {}) } });
  const get = (key: string, path: string) => t.api.send('get', path, { headers: { Authorization: `Bearer ${key}` } });
  const cancel = (key: string, id: string) => t.api.send('post', `/generations/${id}/cancel`, { headers: { Authorization: `Bearer ${key}` } });
  const statusOf = async (key: string, id: string) => (await get(key, `/generations/${id}`)).body.status as string;

  async function mixedRun(): Promise<void> {
    const { alice1, alice2, bob } = keys;
    // Synchronous successes: local (2 images, then 1) and Ark.
    expect((await submit(alice1.key, { prompt: 'one', model: 'local-1', n: 2, response_format: 'b64_json' })).status).toBe(200);
    expect((await submit(alice1.key, { prompt: 'two', model: 'local-1', response_format: 'b64_json' })).status).toBe(200);
    expect((await submit(bob.key, { prompt: 'ark', model: 'held-3', response_format: 'b64_json' })).status).toBe(200);
    // An upstream refusal: failed, its credits released.
    const refused = await submit(alice1.key, { prompt: `refused ${UPSTREAM_REFUSAL}`, model: 'held-1' });
    expect(refused.status).toBeGreaterThanOrEqual(400);
    // Asynchronous: one succeeds; one is canceled while queued (released), one while running (its sent call charged).
    const running = await submit(alice2.key, { prompt: 'r [hold:u1]', model: 'held-1' }, 'respond-async');
    await ark.whenHeld('u1');
    const queued = await submit(alice2.key, { prompt: 'q [hold:u2]', model: 'held-3' }, 'respond-async');
    expect((await cancel(alice2.key, queued.body.id)).body).toMatchObject({ status: 'canceled', usage: { credits_charged: 0 } });
    expect((await cancel(alice2.key, running.body.id)).body).toMatchObject({ status: 'canceled', usage: { credits_charged: 1 } });
    ark.releaseHeld('u1');
    const later = await submit(alice2.key, { prompt: 'later', model: 'local-1' }, 'respond-async');
    await until(async () => (await statusOf(alice2.key, later.body.id)) === 'succeeded', 'the async one to succeed');
    // A synchronous generation canceled while its client waits: its sent call is charged.
    const waiting = submit(bob.key, { prompt: 's [hold:u3]', model: 'held-3' });
    await ark.whenHeld('u3');
    const inFlight = await get(bob.key, '/generations?status=running');
    expect((await cancel(bob.key, inFlight.body.data[0].id)).body).toMatchObject({ status: 'canceled', usage: { credits_charged: 3 } });
    expect((await waiting).status).toBe(409);
    ark.releaseHeld('u3');
    // The same with two images (one call each, both sent): the cancel keeps both.
    const twoImages = submit(bob.key, { prompt: 't [hold:u4]', model: 'held-1', n: 2 });
    await ark.whenHeld('u4');
    const second = await get(bob.key, '/generations?status=running');
    expect((await cancel(bob.key, second.body.data[0].id)).body).toMatchObject({ status: 'canceled', usage: { credits_charged: 2 } });
    expect((await twoImages).status).toBe(409);
    ark.releaseHeld('u4');
    await until(async () => (await books.violations({ settled: true })).length === 0, 'every generation to settle');
    twoImagesId = second.body.data[0].id as string;
  }

  const hourOf = (at: number) => at - (at % HOUR);
  const range = () => `from=${new Date(hourOf(t.clock.now()) - HOUR).toISOString()}&to=${new Date(hourOf(t.clock.now()) + 2 * HOUR).toISOString()}`;
  const usage = async (query: string, headers = bearer(adminSecret())) => t.api.send('get', `/admin/usage?${range()}${query}`, { headers });
  const adminSecret = () => 'test-admin-secret-0123456789';
  /** Whole days around now: questions about keys, owners and metadata then read the per-day table (usage_key_days). */
  const overDays = async (query: string) => {
    const day = bucketStartOf(t.clock.now(), 'day');
    const res = await t.api.send('get', `/admin/usage?from=${new Date(day - DAY).toISOString()}&to=${new Date(day + 2 * DAY).toISOString()}${query}`, {
      headers: bearer(adminSecret()),
    });
    // On a refusal the message shows the envelope and the gateway's error log lines.
    const errors = () => t.logs.filter((line) => Number((JSON.parse(line) as { level?: number }).level) >= 50);
    expect([res.status, res.status === 200 ? 'ok' : { body: res.body, errors: errors() }]).toEqual([200, 'ok']);
    return res;
  };

  async function usedCredits(): Promise<Map<string, number>> {
    const rows = await t.gateway.database.db.selectFrom('api_keys').select(['id', 'credits_used']).execute();
    return new Map(rows.map((row) => [row.id, Number(row.credits_used)]));
  }

  it('exact: credits_charged per key equals what each key was charged (its book), on every settlement path', async () => {
    const res = await usage('&group_by=key');
    expect(res.status).toBe(200);
    const used = await usedCredits();
    const rows = res.body.data as UsageRow[];
    expect(rows.map((row) => row.key_id).sort()).toEqual(
      Object.values(keys)
        .map((k) => k.id)
        .sort(),
    );
    for (const row of rows) expect([row.key_id, row.credits_charged]).toEqual([row.key_id, used.get(row.key_id as string)]);
    // alice1: 2 + 1 credits (local), a refused Ark call (0); alice2: a running cancel kept 1, the queued one 0, 1 async success;
    // bob: 3 (Ark) and two synchronous cancels that kept 3 and 2.
    const byKey = new Map(rows.map((row) => [row.key_id, row]));
    expect(byKey.get(keys.alice1.id)).toMatchObject({ requests: 3, succeeded: 2, failed: 1, canceled: 0, images_delivered: 3, credits_charged: 3 });
    expect(byKey.get(keys.alice2.id)).toMatchObject({
      requests: 3,
      succeeded: 1,
      failed: 0,
      canceled: 2,
      images_delivered: 1,
      credits_charged: 2,
      failures: { canceled: 2 },
    });
    expect(byKey.get(keys.bob.id)).toMatchObject({
      requests: 3,
      succeeded: 1,
      failed: 0,
      canceled: 2,
      images_delivered: 1,
      credits_charged: 8,
      failures: { canceled: 2 },
    });
    expect(Object.keys(byKey.get(keys.alice1.id)?.failures ?? {})).toHaveLength(1);
    // The same from the per-day table, and per owner and team too.
    expect((await overDays('&group_by=key')).body.data).toEqual(rows);
    expect((await overDays('&group_by=owner,metadata.team')).body.data).toEqual((await usage('&group_by=owner,metadata.team')).body.data);
    expect((await overDays('&group_by=key&order=credits_desc&limit=1&bucket=month')).body.data[0]).toMatchObject({ key_id: keys.bob.id, credits_charged: 8 });
  });

  it('without group_by: one row summing the range, with latency percentiles of the delivered generations', async () => {
    const res = await usage('');
    expect(res.body.data).toHaveLength(1);
    const [total] = res.body.data as UsageRow[];
    const used = [...(await usedCredits()).values()].reduce((a, b) => a + b, 0);
    expect(total).toMatchObject({ requests: 9, succeeded: 4, failed: 1, canceled: 4, images_delivered: 5, credits_charged: used });
    expect(total?.latency_ms.p50).toEqual(expect.any(Number));
    expect(total?.latency_ms.p99).toBeGreaterThanOrEqual(total?.latency_ms.p50 as number);
  });

  it('groups by owner, metadata, model, provider and channel, and by day; filters narrow them', async () => {
    const byOwner = (await usage('&group_by=owner')).body.data as UsageRow[];
    expect(byOwner.map((row) => [row.owner, row.credits_charged])).toEqual([
      ['alice@example.com', 5],
      ['bob@example.com', 8],
    ]);
    const byTeam = (await usage('&group_by=metadata.team,model')).body.data as UsageRow[];
    expect(byTeam.find((row) => row.metadata?.team === 'design' && row.model === 'held-3')).toMatchObject({ credits_charged: 6 });
    const byProvider = (await usage('&group_by=provider,channel')).body.data as UsageRow[];
    expect(byProvider.find((row) => row.provider === 'local' && row.channel_id === 'chn_envLocal')).toMatchObject({ succeeded: 3, images_delivered: 4 });
    // Cancels name no channel.
    expect(byProvider.filter((row) => row.channel_id === null).reduce((sum, row) => sum + row.canceled, 0)).toBe(4);
    const daily = (await usage('&bucket=day&group_by=model')).body.data as UsageRow[];
    expect(daily.every((row) => row.bucket_start?.endsWith('T00:00:00.000Z'))).toBe(true);
    expect(daily.reduce((sum, row) => sum + row.credits_charged, 0)).toBe(13);
    const monthly = (await usage('&bucket=month')).body.data as UsageRow[];
    expect(monthly.reduce((sum, row) => sum + row.requests, 0)).toBe(9);
    expect((await usage(`&key_id=${keys.bob.id}`)).body.data[0]).toMatchObject({ credits_charged: 8 });
    expect((await usage('&owner=alice@example.com&group_by=key')).body.data).toHaveLength(2);
    expect((await usage('&metadata=team:ops')).body.data[0]).toMatchObject({ credits_charged: 2 });
    expect((await usage('&model=local-1&provider=local&channel_id=chn_envLocal')).body.data[0]).toMatchObject({ credits_charged: 4, images_delivered: 4 });
  });

  it('orders by credits with cursor pages: the top keys, each page continuing the last', async () => {
    const first = await usage('&group_by=key&order=credits_desc&limit=2');
    expect((first.body.data as UsageRow[]).map((row) => row.key_id)).toEqual([keys.bob.id, keys.alice1.id]);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const second = await usage(`&group_by=key&order=credits_desc&limit=2&cursor=${first.body.next_cursor}`);
    expect((second.body.data as UsageRow[]).map((row) => row.key_id)).toEqual([keys.alice2.id]);
    expect(second.body.next_cursor).toBeNull();
    // A cursor belongs to its query.
    const misused = await usage(`&group_by=model&limit=2&cursor=${first.body.next_cursor}`);
    expect([misused.status, misused.body.error.code, misused.body.error.param]).toEqual([400, 'invalid_request', 'cursor']);
  });

  it('Accept: text/csv answers the same page as RFC 4180 CSV, the next cursor in X-Next-Cursor', async () => {
    const res = await usage('&group_by=owner&order=credits_desc&limit=1', { ...bearer(adminSecret()), Accept: 'text/csv' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    const lines = res.text.split('\r\n');
    expect(lines[0]).toBe(
      'owner,requests,succeeded,failed,canceled,blocked,images_delivered,credits_charged,latency_p50_ms,latency_p95_ms,latency_p99_ms,failures',
    );
    expect(lines[1]).toMatch(/^bob@example\.com,3,1,0,2,0,1,8,\d+,\d+,\d+,canceled=2$/);
    expect(lines[2]).toBe('');
    expect(res.headers['x-next-cursor']).toEqual(expect.any(String));
  });

  it.each([
    ['&group_by=colour', 'group_by'],
    ['&group_by=key,key', 'group_by'],
    ['&bucket=week', 'bucket'],
    ['&limit=0', 'limit'],
    ['&cursor=bm90LWEtY3Vyc29y', 'cursor'],
  ])('400 for %s', async (query, param) => {
    const res = await usage(query);
    expect([res.status, res.body.error.code, res.body.error.param]).toEqual([400, 'invalid_request', param]);
  });

  it('400 for a range that is not whole hours, reversed, too long, or too long for hour buckets', async () => {
    const ask = (query: string) => t.api.send('get', `/admin/usage?${query}`, { headers: bearer(adminSecret()) });
    const cases: Array<[string, string]> = [
      ['from=2026-11-01T00:30:00Z&to=2026-11-02T00:00:00Z', 'from'],
      ['from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z', 'to'],
      ['from=2025-01-01T00:00:00Z&to=2026-11-01T00:00:00Z', 'to'],
      ['from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z&bucket=hour', 'bucket'],
      ['to=2026-03-01T00:00:00Z', 'from'],
    ];
    for (const [query, param] of cases) {
      const res = await ask(query);
      expect([query, res.status, res.body.error.code, res.body.error.param]).toEqual([query, 400, 'invalid_request', param]);
    }
  });

  it('an empty range answers one zero row, and groups answer none', async () => {
    const ask = (extra: string) =>
      t.api.send('get', `/admin/usage?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z${extra}`, { headers: bearer(adminSecret()) });
    expect((await ask('')).body.data).toEqual([
      {
        requests: 0,
        succeeded: 0,
        failed: 0,
        canceled: 0,
        blocked: 0,
        images_delivered: 0,
        credits_charged: 0,
        failures: {},
        latency_ms: { p50: null, p95: null, p99: null },
      },
    ]);
    expect((await ask('&group_by=key')).body).toEqual({ data: [], next_cursor: null });
  });

  it("a synchronous run giving back the calls it had not sent takes the refund off its cancel's rollup row", async () => {
    const db = t.gateway.database.db;
    const row = await findGeneration(db, twoImagesId);
    expect(row).toMatchObject({ status: 'canceled' });
    const before = ((await usage(`&key_id=${keys.bob.id}`)).body.data as UsageRow[])[0];
    const refunded = await db.transaction().execute((trx) => refundUnsentCalls(trx, row as GenerationsTable, 1));
    expect(refunded).toBe(1);
    const after = ((await usage(`&key_id=${keys.bob.id}`)).body.data as UsageRow[])[0];
    expect(after).toMatchObject({ requests: before?.requests, canceled: before?.canceled, credits_charged: (before?.credits_charged ?? 0) - 1 });
    expect(after?.credits_charged).toBe((await usedCredits()).get(keys.bob.id));
    expect((await overDays(`&key_id=${keys.bob.id}`)).body.data).toEqual([after]);
  });

  it('needs the admin secret or a token with usage:read: 401 without, 403 insufficient_scope without the scope', async () => {
    expect((await t.api.send('get', `/admin/usage?${range()}`)).status).toBe(401);
    const wrong = await t.api.send('get', `/admin/usage?${range()}`, { headers: bearer('not-the-secret') });
    expect([wrong.status, wrong.body.error.code]).toEqual([401, 'invalid_admin_secret']);
    expect((await t.api.send('get', `/admin/usage?${range()}`, { headers: bearer(keys.bob.key) })).status).toBe(401);
    const reader = await createAdminTokenVia(t.api, ['keys:read']);
    const refused = await usage('', bearer(reader.token));
    expect([refused.status, refused.body.error.code, refused.body.error.scope]).toEqual([403, 'insufficient_scope', 'usage:read']);
    const analyst = await createAdminTokenVia(t.api, ['usage:read']);
    expect((await usage('&group_by=model', bearer(analyst.token))).status).toBe(200);
  });
});
