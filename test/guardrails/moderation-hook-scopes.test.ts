import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * A moderation hook's endpoint is sent every prompt of its project's keys, so pointing it somewhere
 * reads prompts: setting a hook's URL, or changing it, takes `generations:read` besides
 * `projects:write` (403 `insufficient_scope` naming it). Removing the hook, changing its deadline or
 * failure mode at the same URL, and every other change of a project take `projects:write` alone.
 */
describe('moderation hook URLs need generations:read besides projects:write', () => {
  let t: TestGateway;
  let writeOnly: Record<string, string>;
  let writeAndRead: Record<string, string>;

  beforeAll(async () => {
    // The hooks below are on loopback: allowed as webhooks' private networks are (never called here).
    t = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    writeOnly = bearer((await createAdminTokenVia(t.api, ['projects:write', 'projects:read'])).token);
    writeAndRead = bearer((await createAdminTokenVia(t.api, ['projects:write', 'generations:read'])).token);
  });
  afterAll(async () => {
    await t.close();
  });

  const hook = (path: string) => ({ url: `https://127.0.0.1:9/${path}`, failure_mode: 'fail_closed' });
  const project = (extra: Record<string, unknown> = {}) => ({ name: 'p', owner: 'o', credits_quota: 100, quota_period_days: 30, ...extra });
  const create = (headers: Record<string, string>, body: Record<string, unknown>) => t.api.send('post', '/admin/projects', { body, headers });
  const update = (headers: Record<string, string>, id: string, body: Record<string, unknown>) =>
    t.api.send('patch', `/admin/projects/${id}`, { body, headers });
  const refusedFor = (res: { status: number; body: { error: Record<string, unknown> } }) => {
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'insufficient_scope', type: 'permission_error', scope: 'generations:read' });
    expect(res.body.error.message).toContain('generations:read');
  };

  it('projects:write alone: 403 on setting a hook URL, at creation or by an update, and nothing changes', async () => {
    refusedFor(await create(writeOnly, project({ moderation_hook: hook('a') })));
    expect((await t.api.admin('get', '/admin/projects')).body.data).toEqual([]);

    const created = await create(writeOnly, project());
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    refusedFor(await update(writeOnly, id, { moderation_hook: hook('b') }));
    expect((await t.api.admin('get', `/admin/projects/${id}`)).body.moderation_hook).toBeNull();

    // A project whose hook root set: its URL cannot be moved either.
    expect((await t.api.admin('patch', `/admin/projects/${id}`, { moderation_hook: hook('root') })).status).toBe(200);
    refusedFor(await update(writeOnly, id, { moderation_hook: hook('elsewhere') }));
    refusedFor(await update(writeOnly, id, { name: 'renamed', moderation_hook: { url: 'https://127.0.0.1:9/other' } }));
    const after = (await t.api.admin('get', `/admin/projects/${id}`)).body;
    expect(after).toMatchObject({ name: 'p', moderation_hook: { url: 'https://127.0.0.1:9/root' } });
  });

  it('projects:write alone still makes every other change: limits, retention, the same URL with another mode, removing the hook', async () => {
    const id = (await t.api.admin('post', '/admin/projects', project({ moderation_hook: hook('kept') }))).body.id as string;
    const changed = await update(writeOnly, id, { name: 'renamed', rate_limit_rpm: 10, prompt_retention: 'hash', metadata: { team: 'a' } });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ name: 'renamed', rate_limit_rpm: 10, prompt_retention: 'hash' });
    const sameUrl = await update(writeOnly, id, { moderation_hook: { url: 'https://127.0.0.1:9/kept', failure_mode: 'fail_open', timeout_ms: 500 } });
    expect(sameUrl.status).toBe(200);
    expect(sameUrl.body.moderation_hook).toMatchObject({ url: 'https://127.0.0.1:9/kept', failure_mode: 'fail_open', timeout_ms: 500 });
    const removed = await update(writeOnly, id, { moderation_hook: null });
    expect(removed.status).toBe(200);
    expect(removed.body.moderation_hook).toBeNull();
  });

  it('projects:write with generations:read: sets and moves a hook URL (200/201), its secret shown once', async () => {
    const created = await create(writeAndRead, project({ moderation_hook: hook('c') }));
    expect(created.status).toBe(201);
    expect(created.body.moderation_hook).toMatchObject({ url: 'https://127.0.0.1:9/c', secret: expect.stringMatching(/^whsec_/) });
    const moved = await update(writeAndRead, created.body.id as string, { moderation_hook: hook('d') });
    expect(moved.status).toBe(200);
    expect(moved.body.moderation_hook).toMatchObject({ url: 'https://127.0.0.1:9/d' });
    const plain = await create(writeAndRead, project());
    const set = await update(writeAndRead, plain.body.id as string, { moderation_hook: hook('e') });
    expect(set.status).toBe(200);
    expect(set.body.moderation_hook.secret).toMatch(/^whsec_/);
  });
});
