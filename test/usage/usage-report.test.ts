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
  /** alice1's project and bob's; alice2 is in none. */
  const projects: Record<'design' | 'studio', string> = {} as never;
  let twoImagesId = '';

  beforeAll(async () => {
    booksGateway = await startBooksGateway(ONE_BACKGROUND_RUN);
    ({ t, ark, books } = booksGateway);
    const project = async (name: string) => {
      const res = await t.api.admin('post', '/admin/projects', { name, owner: 'projects@example.com', credits_quota: 1000, quota_period_days: 30 });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    projects.design = await project('design');
    projects.studio = await project('studio');
    const create = (owner: string, team: string, projectId?: string) =>
      t.createKey({ owner, credits_quota: 100, allowed_providers: ['local', 'jimeng'], metadata: { team }, ...(projectId ? { project_id: projectId } : {}) });
    keys.alice1 = await create('alice@example.com', 'design', projects.design);
    keys.alice2 = await create('alice@example.com', 'ops');
    keys.bob = await create('bob@example.com', 'design', projects.studio);
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

  /** What each project's keys did in the mixed run (alice1 in design, bob in studio, alice2 in none). */
  const BY_PROJECT = () =>
    new Map<string | null, Partial<UsageRow>>([
      [null, { requests: 3, succeeded: 1, failed: 0, canceled: 2, blocked: 0, images_delivered: 1, credits_charged: 2, failures: { canceled: 2 } }],
      [projects.design, { requests: 3, succeeded: 2, failed: 1, canceled: 0, blocked: 0, images_delivered: 3, credits_charged: 3 }],
      [projects.studio, { requests: 3, succeeded: 1, failed: 0, canceled: 2, blocked: 0, images_delivered: 1, credits_charged: 8, failures: { canceled: 2 } }],
    ]);

  it('groups by project: exact sums per project, a null row for the key in no project, the same from hours, days and months', async () => {
    const res = await usage('&group_by=project');
    expect(res.status).toBe(200);
    const rows = res.body.data as UsageRow[];
    // null ('' inside) sorts first; the projects follow by id.
    expect(rows[0]?.project_id).toBeNull();
    expect(rows.map((row) => row.project_id)).toHaveLength(3);
    for (const row of rows) {
      expect(Object.keys(row).filter((name) => ['key_id', 'owner', 'model', 'provider', 'channel_id', 'metadata', 'bucket_start'].includes(name))).toEqual([]);
      expect(row).toMatchObject(BY_PROJECT().get(row.project_id ?? null) ?? { missing: row.project_id });
    }
    // Each project's sums are its keys' sums, which are their books.
    const used = await usedCredits();
    expect(new Map(rows.map((row) => [row.project_id, row.credits_charged]))).toEqual(
      new Map([
        [null, used.get(keys.alice2.id)],
        [projects.design, used.get(keys.alice1.id)],
        [projects.studio, used.get(keys.bob.id)],
      ]),
    );
    // Whole days (usage_key_days) and months (usage_key_months) answer the same.
    expect((await overDays('&group_by=project')).body.data).toEqual(rows);
    const monthly = (await overDays('&group_by=project&bucket=month')).body.data as UsageRow[];
    expect(monthly.reduce((sum, row) => sum + (row.project_id === projects.studio ? row.credits_charged : 0), 0)).toBe(8);
    // With other dimensions (usage_rollups): by project and model, and by project and key.
    const byModel = (await usage('&group_by=project,model')).body.data as UsageRow[];
    expect(byModel.filter((row) => row.project_id === projects.studio).map((row) => [row.model, row.credits_charged])).toEqual([
      ['held-1', 2],
      ['held-3', 6],
    ]);
    const byKey = (await usage('&group_by=key,project')).body.data as UsageRow[];
    expect(new Map(byKey.map((row) => [row.key_id, row.project_id]))).toEqual(
      new Map([
        [keys.alice1.id, projects.design],
        [keys.alice2.id, null],
        [keys.bob.id, projects.studio],
      ]),
    );
  });

  it('project_id narrows to the keys of that project; a project without keys answers no usage', async () => {
    expect((await usage(`&project_id=${projects.studio}`)).body.data).toEqual([expect.objectContaining(BY_PROJECT().get(projects.studio))]);
    const design = (await usage(`&project_id=${projects.design}&group_by=key`)).body.data as UsageRow[];
    expect(design).toEqual([expect.objectContaining({ key_id: keys.alice1.id, ...BY_PROJECT().get(projects.design) })]);
    expect((await overDays(`&project_id=${projects.design}&group_by=project`)).body.data).toEqual([
      expect.objectContaining({ project_id: projects.design, credits_charged: 3 }),
    ]);
    // With a filter on the generations' side as well (usage_rollups).
    expect((await usage(`&project_id=${projects.studio}&model=held-3`)).body.data[0]).toMatchObject({ requests: 2, credits_charged: 6 });
    expect((await usage('&project_id=prj_noSuchProject&group_by=key')).body).toEqual({ data: [], next_cursor: null });
    expect((await usage('&project_id=prj_noSuchProject')).body.data).toEqual([expect.objectContaining({ requests: 0, credits_charged: 0 })]);
  });

  it("a key's project is the one it is in when you ask: moved into a project, its past usage counts there", async () => {
    const move = async (projectId: string | null) =>
      expect((await t.api.admin('patch', `/admin/keys/${keys.alice2.id}`, { project_id: projectId })).status).toBe(200);
    await move(projects.design);
    try {
      const rows = (await usage('&group_by=project')).body.data as UsageRow[];
      expect(new Map(rows.map((row) => [row.project_id, row.credits_charged]))).toEqual(
        new Map([
          [projects.design, 5],
          [projects.studio, 8],
        ]),
      );
      expect((await overDays(`&project_id=${projects.design}`)).body.data[0]).toMatchObject({ requests: 6, canceled: 2, credits_charged: 5 });
    } finally {
      await move(null);
    }
    expect(((await usage('&group_by=project')).body.data as UsageRow[])[0]).toMatchObject({ project_id: null, credits_charged: 2 });
  });

  it('group_by=project pages with cursors: by credits, and in the default order one row a page', async () => {
    const first = await usage('&group_by=project&order=credits_desc&limit=2');
    expect((first.body.data as UsageRow[]).map((row) => [row.project_id, row.credits_charged])).toEqual([
      [projects.studio, 8],
      [projects.design, 3],
    ]);
    const second = await usage(`&group_by=project&order=credits_desc&limit=2&cursor=${first.body.next_cursor}`);
    expect((second.body.data as UsageRow[]).map((row) => [row.project_id, row.credits_charged])).toEqual([[null, 2]]);
    expect(second.body.next_cursor).toBeNull();
    // One a page, from the null row on: the pages are the whole answer, in its order.
    const whole = (await usage('&group_by=project')).body.data as UsageRow[];
    const paged: UsageRow[] = [];
    let cursor: string | null = null;
    do {
      const page = await overDays(`&group_by=project&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      paged.push(...(page.body.data as UsageRow[]));
      cursor = page.body.next_cursor as string | null;
    } while (cursor !== null && paged.length < 5);
    expect(paged).toEqual(whole);
    // A cursor of one project's pages does not open another's.
    const narrowed = await usage(`&group_by=project&order=credits_desc&limit=2&project_id=${projects.design}&cursor=${first.body.next_cursor}`);
    expect([narrowed.status, narrowed.body.error.param]).toEqual([400, 'cursor']);
  });

  it('CSV grouped by project: a project_id column, empty for keys in no project', async () => {
    const res = await usage('&group_by=project&limit=2', { ...bearer(adminSecret()), Accept: 'text/csv' });
    expect(res.status).toBe(200);
    const lines = res.text.split('\r\n');
    expect(lines[0]).toBe(
      'project_id,requests,succeeded,failed,canceled,blocked,images_delivered,credits_charged,upstream_cost_usd,margin_usd,latency_p50_ms,latency_p95_ms,latency_p99_ms,failures',
    );
    expect(lines[1]).toMatch(/^,3,1,0,2,0,1,2,,,\d+,\d+,\d+,canceled=2$/);
    expect(lines[2]).toMatch(/^prj_[0-9A-Za-z]+,3,/);
    expect(lines[3]).toBe('');
    const next = await usage(`&group_by=project&limit=2&cursor=${res.headers['x-next-cursor']}`, { ...bearer(adminSecret()), Accept: 'text/csv' });
    const rest = next.text.split('\r\n');
    expect(rest).toHaveLength(3);
    expect([lines[2], rest[1]].map((line) => line?.split(',')[0]).sort()).toEqual([projects.design, projects.studio].sort());
    expect(next.headers['x-next-cursor']).toBeUndefined();
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
      'owner,requests,succeeded,failed,canceled,blocked,images_delivered,credits_charged,upstream_cost_usd,margin_usd,latency_p50_ms,latency_p95_ms,latency_p99_ms,failures',
    );
    expect(lines[1]).toMatch(/^bob@example\.com,3,1,0,2,0,1,8,,,\d+,\d+,\d+,canceled=2$/);
    expect(lines[2]).toBe('');
    expect(res.headers['x-next-cursor']).toEqual(expect.any(String));
  });

  it.each([
    ['&group_by=colour', 'group_by'],
    ['&group_by=key,key', 'group_by'],
    ['&group_by=project,project', 'group_by'],
    ['&group_by=projects', 'group_by'],
    ['&project_id=proj_5fJ2kLmN', 'project_id'],
    ['&project_id=prj_', 'project_id'],
    ['&project_id=prj_a-b', 'project_id'],
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
        upstream_cost_usd: null,
        margin_usd: null,
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
