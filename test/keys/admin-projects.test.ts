import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

const validProject = { name: 'design', owner: 'design@example.com', credits_quota: 100, quota_period_days: 30 };

describe('admin projects API', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const createProject = async (overrides: Record<string, unknown> = {}): Promise<Record<string, unknown> & { id: string }> => {
    const res = await t.api.admin('post', '/admin/projects', { ...validProject, ...overrides });
    if (res.status !== 201) throw new Error(`createProject: ${res.status} ${res.text}`);
    return res.body as Record<string, unknown> & { id: string };
  };

  describe('POST /admin/projects (createProject)', () => {
    it('201 with Location and the documented defaults', async () => {
      const res = await t.api.admin('post', '/admin/projects', validProject);
      expect(res.status).toBe(201);
      expect(res.headers.location).toBe(`/admin/projects/${res.body.id}`);
      expect(res.body.id).toMatch(/^prj_[0-9A-Za-z]{22}$/);
      expect(res.body).toMatchObject({
        ...validProject,
        status: 'active',
        credits_used: 0,
        credits_remaining: 100,
        rate_limit_rpm: null,
        max_concurrent: null,
        allowed_providers: null,
        allowed_models: null,
        metadata: {},
        disabled_at: null,
      });
      expect(Date.parse(res.body.period_resets_at) - Date.parse(res.body.period_started_at)).toBe(30 * 86_400_000);
    });

    it('is idempotent under an Idempotency-Key', async () => {
      const headers = { Authorization: `Bearer ${ADMIN_SECRET}`, 'Idempotency-Key': `prj-${Date.now()}` };
      const first = await t.api.send('post', '/admin/projects', { body: validProject, headers });
      const again = await t.api.send('post', '/admin/projects', { body: validProject, headers });
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.body.id).toBe(first.body.id);
      expect(again.headers['idempotent-replayed']).toBe('true');
      const reused = await t.api.send('post', '/admin/projects', { body: { ...validProject, name: 'other' }, headers });
      expect(reused.status).toBe(422);
      expect(reused.body.error.code).toBe('idempotency_key_reused');
    });

    it.each([
      [{ ...validProject, allowed_providers: ['nope'] }, 'allowed_providers'],
      [{ ...validProject, allowed_models: ['no-such-model'] }, 'allowed_models'],
      [{ ...validProject, credits_quota: -1 }, 'credits_quota'],
      [{ ...validProject, quota_period_days: 0 }, 'quota_period_days'],
      [{ ...validProject, rate_limit_rpm: 0 }, 'rate_limit_rpm'],
      [{ ...validProject, color: 'blue' }, 'color'],
      [{ owner: 'x', credits_quota: 1, quota_period_days: 1 }, 'name'],
    ])('400 invalid_request for %j', async (body, param) => {
      const res = await t.api.admin('post', '/admin/projects', body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    });
  });

  describe('GET /admin/projects (listProjects)', () => {
    it('pages newest first with a cursor and filters by owner and status', async () => {
      const owner = `pager-${Date.now()}@example.com`;
      const ids: string[] = [];
      for (let i = 0; i < 5; i += 1) {
        ids.push((await createProject({ owner, name: `p${i}` })).id);
        t.clock.advanceMs(5);
      }
      await t.api.admin('delete', `/admin/projects/${ids[1]}`);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { status: number; body: { data: Array<{ id: string }>; next_cursor: string | null } } = await t.api.admin(
          'get',
          `/admin/projects?owner=${encodeURIComponent(owner)}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        );
        expect(page.status).toBe(200);
        expect(page.body.data.length).toBeLessThanOrEqual(2);
        seen.push(...page.body.data.map((p) => p.id));
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(seen).toEqual([...ids].reverse());
      const disabled = await t.api.admin('get', `/admin/projects?owner=${encodeURIComponent(owner)}&status=disabled`);
      expect(disabled.body.data.map((p: { id: string }) => p.id)).toEqual([ids[1]]);
    });

    it('400 for a bad cursor (a key list cursor included), limit or status', async () => {
      const keysPage = await t.api.admin('get', '/admin/keys?limit=1');
      for (const query of ['cursor=garbage', `cursor=${keysPage.body.next_cursor}`, 'limit=0', 'limit=101', 'status=sleeping', 'unknown=1']) {
        const res = await t.api.admin('get', `/admin/projects?${query}`);
        expect([query, res.status]).toEqual([query, 400]);
        expect(res.body.error.code).toBe('invalid_request');
      }
    });
  });

  describe('GET /admin/projects/{id} (getProject)', () => {
    it('200 with the usage of all its keys in the current period', async () => {
      const project = await createProject({ credits_quota: 10 });
      const a = await t.createKey({ project_id: project.id });
      const b = await t.createKey({ project_id: project.id });
      expect((await t.api.client(a.key, localRequest())).status).toBe(200);
      expect((await t.api.client(b.key, localRequest({ n: 2 }))).status).toBe(200);
      const res = await t.api.admin('get', `/admin/projects/${project.id}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: project.id, credits_used: 3, credits_remaining: 7 });
    });

    it('404 project_not_found, 400 for a malformed id', async () => {
      const missing = await t.api.admin('get', '/admin/projects/prj_doesnotexist');
      expect(missing.status).toBe(404);
      expect(missing.body.error).toMatchObject({ code: 'project_not_found', param: 'id' });
      expect((await t.api.admin('get', '/admin/projects/key_abc')).status).toBe(400);
    });
  });

  describe('PATCH /admin/projects/{id} (updateProject)', () => {
    it('changes the given fields only, and disables / re-enables with status', async () => {
      const project = await createProject();
      const res = await t.api.admin('patch', `/admin/projects/${project.id}`, {
        name: 'renamed',
        rate_limit_rpm: 50,
        max_concurrent: 3,
        allowed_providers: ['local'],
        allowed_models: ['local-1'],
        metadata: { team: 'design' },
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        name: 'renamed',
        owner: validProject.owner,
        rate_limit_rpm: 50,
        max_concurrent: 3,
        allowed_providers: ['local'],
        allowed_models: ['local-1'],
        metadata: { team: 'design' },
      });
      const disabled = await t.api.admin('patch', `/admin/projects/${project.id}`, { status: 'disabled' });
      expect(disabled.body.status).toBe('disabled');
      expect(disabled.body.disabled_at).not.toBeNull();
      const enabled = await t.api.admin('patch', `/admin/projects/${project.id}`, { status: 'active', allowed_models: null });
      expect(enabled.body).toMatchObject({ status: 'active', disabled_at: null, allowed_models: null });
    });

    it('400 for unknown providers or models, an empty body; 404 for an unknown project', async () => {
      const project = await createProject();
      for (const [body, param] of [
        [{ allowed_providers: ['nope'] }, 'allowed_providers'],
        [{ allowed_models: ['nope'] }, 'allowed_models'],
      ] as const) {
        const res = await t.api.admin('patch', `/admin/projects/${project.id}`, body);
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
      }
      expect((await t.api.admin('patch', `/admin/projects/${project.id}`, {})).status).toBe(400);
      const missing = await t.api.admin('patch', '/admin/projects/prj_missing', { name: 'x' });
      expect(missing.status).toBe(404);
      expect(missing.body.error.code).toBe('project_not_found');
    });
  });

  describe('DELETE /admin/projects/{id} (disableProject)', () => {
    it('disables (idempotent: the second changes and records nothing); 404 for an unknown project', async () => {
      const project = await createProject();
      const first = await t.api.admin('delete', `/admin/projects/${project.id}`);
      expect(first.status).toBe(200);
      expect(first.body.status).toBe('disabled');
      const second = await t.api.admin('delete', `/admin/projects/${project.id}`);
      expect(second.body.disabled_at).toBe(first.body.disabled_at);
      const events = await t.api.admin('get', `/admin/audit-events?target=${project.id}`);
      expect(events.body.data.map((e: { action: string }) => e.action)).toEqual(['project.disabled', 'project.created']);
      const missing = await t.api.admin('delete', '/admin/projects/prj_missing');
      expect(missing.status).toBe(404);
      expect(missing.body.error.code).toBe('project_not_found');
    });
  });

  describe('POST /admin/projects/{id}/quota (setProjectQuota)', () => {
    it('sets the quota, keeps usage unless reset_usage, and audits the change', async () => {
      const project = await createProject({ credits_quota: 10 });
      const key = await t.createKey({ project_id: project.id });
      expect((await t.api.client(key.key, localRequest({ n: 2 }))).status).toBe(200);
      const raised = await t.api.admin('post', `/admin/projects/${project.id}/quota`, { credits_quota: 20, quota_period_days: 7 });
      expect(raised.status).toBe(200);
      expect(raised.body).toMatchObject({ credits_quota: 20, credits_used: 2, quota_period_days: 7 });
      const reset = await t.api.admin('post', `/admin/projects/${project.id}/quota`, { credits_quota: 20, reset_usage: true });
      expect(reset.body).toMatchObject({ credits_used: 0, credits_remaining: 20 });
      // The key's own book is its own: the project's reset leaves it.
      expect(await t.api.creditsUsed(key.id)).toBe(2);
      const events = await t.api.admin('get', `/admin/audit-events?target=${project.id}&action=project.quota_set`);
      expect(events.body.data).toHaveLength(2);
      expect(events.body.data[0].after).toMatchObject({ credits_used: 0 });
    });

    it('400 for a bad body, 404 for an unknown project', async () => {
      const project = await createProject();
      expect((await t.api.admin('post', `/admin/projects/${project.id}/quota`, { credits_quota: -1 })).status).toBe(400);
      const missing = await t.api.admin('post', '/admin/projects/prj_missing/quota', { credits_quota: 5 });
      expect(missing.status).toBe(404);
      expect(missing.body.error.code).toBe('project_not_found');
    });
  });

  describe("GET /admin/projects/{id}/keys (listProjectKeys) and keys' project_id", () => {
    it('lists the keys that joined at creation or by update, newest first, paged; a key leaves with null', async () => {
      const project = await createProject();
      const first = await t.createKey({ project_id: project.id });
      t.clock.advanceMs(5);
      const second = await t.createKey();
      expect(second.record.project_id).toBeNull();
      const moved = await t.api.admin('patch', `/admin/keys/${second.id}`, { project_id: project.id });
      expect(moved.body.project_id).toBe(project.id);
      const page1 = await t.api.admin('get', `/admin/projects/${project.id}/keys?limit=1`);
      expect(page1.status).toBe(200);
      expect(page1.body.data.map((k: { id: string }) => k.id)).toEqual([second.id]);
      const page2 = await t.api.admin('get', `/admin/projects/${project.id}/keys?limit=1&cursor=${page1.body.next_cursor}`);
      expect(page2.body.data.map((k: { id: string }) => k.id)).toEqual([first.id]);
      expect(page2.body.next_cursor).toBeNull();
      const left = await t.api.admin('patch', `/admin/keys/${first.id}`, { project_id: null });
      expect(left.body.project_id).toBeNull();
      const after = await t.api.admin('get', `/admin/projects/${project.id}/keys`);
      expect(after.body.data.map((k: { id: string }) => k.id)).toEqual([second.id]);
    });

    it('404 for an unknown project; a key naming an unknown project is 400 invalid_request (param project_id)', async () => {
      const missing = await t.api.admin('get', '/admin/projects/prj_missing/keys');
      expect(missing.status).toBe(404);
      expect(missing.body.error.code).toBe('project_not_found');
      const create = await t.api.admin('post', '/admin/keys', { ...validProject, project_id: 'prj_missing' });
      expect(create.status).toBe(400);
      expect(create.body.error).toMatchObject({ code: 'invalid_request', param: 'project_id' });
      const key = await t.createKey();
      const update = await t.api.admin('patch', `/admin/keys/${key.id}`, { project_id: 'prj_missing' });
      expect(update.status).toBe(400);
      expect(update.body.error).toMatchObject({ code: 'invalid_request', param: 'project_id' });
    });
  });

  describe('auth on every project operation', () => {
    const operations: Array<['get' | 'post' | 'patch' | 'delete', string, unknown, 'projects:read' | 'projects:write']> = [
      ['post', '/admin/projects', validProject, 'projects:write'],
      ['get', '/admin/projects', undefined, 'projects:read'],
      ['get', '/admin/projects/prj_x', undefined, 'projects:read'],
      ['patch', '/admin/projects/prj_x', { name: 'x' }, 'projects:write'],
      ['delete', '/admin/projects/prj_x', undefined, 'projects:write'],
      ['post', '/admin/projects/prj_x/quota', { credits_quota: 1 }, 'projects:write'],
      ['get', '/admin/projects/prj_x/keys', undefined, 'projects:read'],
    ];

    it.each(operations)('%s %s: 401 without or with a wrong credential, 403 without its scope', async (method, path, body, scope) => {
      const { key } = await t.createKey();
      for (const headers of [{} as Record<string, string>, { Authorization: `Bearer ${ADMIN_SECRET}x` }, { Authorization: `Bearer ${key}` }]) {
        const res = await t.api.send(method, path, { body, headers });
        expect(res.status).toBe(401);
        expect(res.body.error).toMatchObject({ code: 'invalid_admin_secret', type: 'authentication_error' });
      }
      const other = scope === 'projects:read' ? 'projects:write' : 'projects:read';
      const wrongScope = await createAdminTokenVia(t.api, ['keys:read', 'keys:write', other]);
      const refused = await t.api.send(method, path, { body, headers: bearer(wrongScope.token) });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: 'insufficient_scope', scope });
      const scoped = await createAdminTokenVia(t.api, [scope]);
      const admitted = await t.api.send(method, path, { body, headers: bearer(scoped.token) });
      expect([200, 201, 404]).toContain(admitted.status);
    });
  });
});
