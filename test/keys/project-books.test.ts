import { ApiError } from '../../src/errors/api-error';
import { findKeyByHash } from '../../src/keys/keys.repository';
import { hashKey } from '../../src/keys/key-secret';
import { toClientKey } from '../../src/keys/key.model';
import { type BooksGateway, startBooksGateway } from '../helpers/books';
import { localRequest } from '../helpers/test-gateway';

/**
 * Issue #38 section 1: a key in a project reserves from its own book and the project's in one
 * transaction; settlement and refunds move both by the same amount; the project's limits, state and
 * narrowing refuse before anything is charged. The two-level books invariant (test/helpers/books.ts)
 * is checked after every scenario.
 */
describe('projects: two-level books and limits', () => {
  let g: BooksGateway;
  beforeAll(async () => {
    g = await startBooksGateway();
  });
  afterAll(() => g.close());
  afterEach(async () => {
    await g.settleAll();
    expect(await g.books.violations({ settled: true })).toEqual([]);
  });

  const db = () => g.t.gateway.database.db;
  const newProject = async (overrides: Record<string, unknown> = {}) => {
    const res = await g.t.api.admin('post', '/admin/projects', { name: 'p', owner: 'o@example.com', credits_quota: 1000, quota_period_days: 30, ...overrides });
    expect(res.status).toBe(201);
    await g.books.observe();
    return res.body as { id: string };
  };
  const newKey = async (projectId: string | null, overrides: Record<string, unknown> = {}) => {
    const key = await g.t.createKey({ allowed_providers: ['local', 'jimeng'], ...(projectId ? { project_id: projectId } : {}), ...overrides });
    await g.books.observe();
    return key;
  };
  const project = async (id: string) => (await g.t.api.admin('get', `/admin/projects/${id}`)).body as { credits_used: number; credits_remaining: number };
  const quick = (key: string, overrides: Record<string, unknown> = {}) => g.t.api.client(key, localRequest(overrides));

  it('a project quota shared by two keys is exact under concurrent generations: the rest are refused 402 project_quota_exceeded', async () => {
    const { id } = await newProject({ credits_quota: 5 });
    const a = await newKey(id);
    const b = await newKey(id);
    const responses = await Promise.all(Array.from({ length: 16 }, (_, i) => quick(i % 2 === 0 ? a.key : b.key)));
    const statuses = responses.map((res) => (res.status === 200 ? 'ok' : `${res.status} ${res.body.error.code}`)).sort();
    expect(statuses).toEqual([...Array<string>(11).fill('402 project_quota_exceeded'), ...Array<string>(5).fill('ok')]);
    const refused = responses.find((res) => res.status === 402);
    expect(refused?.body.error.period_resets_at).toEqual(expect.any(String));
    expect(await project(id)).toMatchObject({ credits_used: 5, credits_remaining: 0 });
    // Refused by the project, the keys' own books gave their reservation back: they count what succeeded.
    expect((await g.t.api.creditsUsed(a.id)) + (await g.t.api.creditsUsed(b.id))).toBe(5);
  });

  it("the key's own quota still refuses first (402 quota_exceeded), and a key without a project is untouched by projects", async () => {
    const { id } = await newProject({ credits_quota: 100 });
    const inProject = await newKey(id, { credits_quota: 1 });
    expect((await quick(inProject.key)).status).toBe(200);
    const over = await quick(inProject.key);
    expect([over.status, over.body.error.code]).toEqual([402, 'quota_exceeded']);
    expect(await project(id)).toMatchObject({ credits_used: 1 });
    const alone = await newKey(null, { credits_quota: 2 });
    expect((await quick(alone.key)).status).toBe(200);
    expect(await g.t.api.creditsUsed(alone.id)).toBe(1);
    const row = await db().selectFrom('generations').select(['project_id', 'project_usage_epoch']).where('key_id', '=', alone.id).executeTakeFirstOrThrow();
    expect(row).toEqual({ project_id: null, project_usage_epoch: null });
  });

  it('a failed generation gives its credits back to both books; one in flight holds them on both', async () => {
    const { id } = await newProject({ credits_quota: 3 });
    const key = await newKey(id);
    const failing = await g.startHeld(key.key, { tag: 'prj-fail', fail: true, model: 'held-3' });
    expect(failing.reserved).toBe(true);
    expect(await project(id)).toMatchObject({ credits_used: 3 });
    expect(await g.t.api.creditsUsed(key.id)).toBe(3);
    expect(await g.books.violations()).toEqual([]);
    const res = await failing.finish();
    expect(res.body.error.code).toBe('content_policy_violation');
    expect(await project(id)).toMatchObject({ credits_used: 0 });
    expect(await g.t.api.creditsUsed(key.id)).toBe(0);
  });

  it('reset_usage of the project during a failing generation: the failure gives nothing back to the new project book', async () => {
    const { id } = await newProject({ credits_quota: 2 });
    const key = await newKey(id);
    const slow = await g.startHeld(key.key, { tag: 'prj-reset-fail', fail: true });
    expect(slow.reserved).toBe(true);
    expect((await g.t.api.admin('post', `/admin/projects/${id}/quota`, { credits_quota: 2, reset_usage: true })).status).toBe(200);
    await g.books.observe();
    expect((await quick(key.key)).status).toBe(200);
    expect((await quick(key.key)).status).toBe(200);
    await slow.finish();
    const third = await quick(key.key);
    expect([third.status, third.body.error.code]).toEqual([402, 'project_quota_exceeded']);
    expect(await project(id)).toMatchObject({ credits_used: 2 });
  });

  it("the project's period rolls over like a key's: its usage lapses at the period's end", async () => {
    const { id } = await newProject({ credits_quota: 1, quota_period_days: 1 });
    const key = await newKey(id);
    expect((await quick(key.key)).status).toBe(200);
    expect((await quick(key.key)).status).toBe(402);
    g.t.clock.advanceDays(1);
    expect(await project(id)).toMatchObject({ credits_used: 0, credits_remaining: 1 });
    expect((await quick(key.key)).status).toBe(200);
    const epoch = await db().selectFrom('projects').select('usage_epoch').where('id', '=', id).executeTakeFirstOrThrow();
    expect(Number(epoch.usage_epoch)).toBe(2);
  });

  it('disabling the project refuses its keys at once (403 project_disabled, nothing charged); in-flight work settles; enabling restores them', async () => {
    const { id } = await newProject();
    const key = await newKey(id);
    expect((await quick(key.key)).status).toBe(200);
    const inFlight = await g.startHeld(key.key, { tag: 'prj-disable' });
    expect((await g.t.api.admin('delete', `/admin/projects/${id}`)).status).toBe(200);
    const refused = await quick(key.key);
    expect([refused.status, refused.body.error.code]).toEqual([403, 'project_disabled']);
    expect((await inFlight.finish()).status).toBe(200);
    expect(await project(id)).toMatchObject({ credits_used: 2 });
    expect((await g.t.api.admin('patch', `/admin/projects/${id}`, { status: 'active' })).status).toBe(200);
    expect((await quick(key.key)).status).toBe(200);
  });

  it('the reservation refuses a disabled project even for a request whose key copy predates the disable (a replica not told yet)', async () => {
    const { id } = await newProject();
    const key = await newKey(id);
    const readEarlier = await findKeyByHash(db(), hashKey(key.key));
    expect((await g.t.api.admin('delete', `/admin/projects/${id}`)).status).toBe(200);
    const outcome = await g.t.gateway.generation
      .generateForKey(toClientKey(readEarlier!), { prompt: 'stale', model: 'local-1', size: '32x32' }, new AbortController().signal)
      .then(
        () => 'charged',
        (error: unknown) => (error instanceof ApiError ? error.code : String(error)),
      );
    expect(outcome).toBe('project_disabled');
    expect(await project(id)).toMatchObject({ credits_used: 0 });
    expect(await g.t.api.creditsUsed(key.id)).toBe(0);
  });

  it('a key moved into a project after its copy was read is still charged to the project (the one-statement path defers to the general one)', async () => {
    const { id } = await newProject({ credits_quota: 1 });
    const key = await newKey(null);
    const readEarlier = await findKeyByHash(db(), hashKey(key.key));
    expect((await g.t.api.admin('patch', `/admin/keys/${key.id}`, { project_id: id })).status).toBe(200);
    const generate = () =>
      g.t.gateway.generation.generateForKey(toClientKey(readEarlier!), { prompt: 'moved', model: 'local-1', size: '32x32' }, new AbortController().signal).then(
        () => 'charged',
        (error: unknown) => (error instanceof ApiError ? error.code : String(error)),
      );
    expect(await generate()).toBe('charged');
    expect(await generate()).toBe('project_quota_exceeded');
    expect(await project(id)).toMatchObject({ credits_used: 1 });
  });

  it('the project narrows its keys: 403 project_model_not_allowed, project_provider_not_allowed; never widens', async () => {
    const { id } = await newProject({ allowed_models: ['held-1'] });
    const key = await newKey(id);
    const model = await quick(key.key);
    expect([model.status, model.body.error.code]).toEqual([403, 'project_model_not_allowed']);
    expect((await g.t.api.admin('patch', `/admin/projects/${id}`, { allowed_models: null, allowed_providers: ['jimeng'] })).status).toBe(200);
    const provider = await quick(key.key);
    expect([provider.status, provider.body.error.code]).toEqual([403, 'project_provider_not_allowed']);
    // The key's own list is not widened by its project's.
    const narrowKey = await newKey(id, { allowed_providers: ['local'] });
    const res = await g.t.api.client(narrowKey.key, { prompt: 'x', model: 'held-1' });
    expect([res.status, res.body.error.code]).toEqual([403, 'provider_not_allowed']);
    expect(await project(id)).toMatchObject({ credits_used: 0 });
  });

  it("the project's rate_limit_rpm counts its keys' requests together: 429 project_rate_limited with Retry-After", async () => {
    const { id } = await newProject({ rate_limit_rpm: 3 });
    const a = await newKey(id);
    const b = await newKey(id);
    expect((await quick(a.key)).status).toBe(200);
    expect((await quick(b.key)).status).toBe(200);
    expect((await quick(a.key)).status).toBe(200);
    const over = await quick(b.key);
    expect([over.status, over.body.error.code]).toEqual([429, 'project_rate_limited']);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    expect(await project(id)).toMatchObject({ credits_used: 3 });
  });

  it("the project's max_concurrent holds across its keys: 429 project_concurrency_limited while one is in flight", async () => {
    const { id } = await newProject({ max_concurrent: 1 });
    const a = await newKey(id);
    const b = await newKey(id);
    const held = await g.startHeld(a.key, { tag: 'prj-slot' });
    expect(held.reserved).toBe(true);
    const over = await quick(b.key);
    expect([over.status, over.body.error.code]).toEqual([429, 'project_concurrency_limited']);
    expect((await held.finish()).status).toBe(200);
    expect((await quick(b.key)).status).toBe(200);
  });
});
