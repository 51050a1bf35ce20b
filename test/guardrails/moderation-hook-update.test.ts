import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * Changing a project's moderation hook (updateProject): what the change leaves out (`failure_mode`,
 * `timeout_ms`) keeps the hook's current value, so a new URL alone is a whole change; a project
 * without a hook still needs `failure_mode`.
 */
describe('a moderation hook changed in part (updateProject)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const project = { name: 'p', owner: 'o', credits_quota: 10, quota_period_days: 30 };

  it('a new url alone keeps failure_mode and timeout_ms; failure_mode alone (with the url) keeps timeout_ms', async () => {
    const created = await t.api.admin('post', '/admin/projects', {
      ...project,
      moderation_hook: { url: 'https://moderation.example.com/hook', timeout_ms: 750, failure_mode: 'fail_closed' },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;

    const moved = await t.api.admin('patch', `/admin/projects/${id}`, { moderation_hook: { url: 'https://moderation.example.com/hook-v2' } });
    expect([moved.status, moved.body.moderation_hook]).toEqual([
      200,
      { url: 'https://moderation.example.com/hook-v2', timeout_ms: 750, failure_mode: 'fail_closed', previous_secret_expires_at: null },
    ]);

    const opened = await t.api.admin('patch', `/admin/projects/${id}`, {
      moderation_hook: { url: 'https://moderation.example.com/hook-v2', failure_mode: 'fail_open' },
    });
    expect(opened.body.moderation_hook).toEqual({
      url: 'https://moderation.example.com/hook-v2',
      timeout_ms: 750,
      failure_mode: 'fail_open',
      previous_secret_expires_at: null,
    });
  });

  it('a project without a hook: failure_mode is required (400 naming moderation_hook.failure_mode), then the hook is made', async () => {
    const created = await t.api.admin('post', '/admin/projects', project);
    const id = created.body.id as string;
    const refused = await t.api.admin('patch', `/admin/projects/${id}`, { moderation_hook: { url: 'https://moderation.example.com/hook' } });
    expect([refused.status, refused.body.error.code, refused.body.error.param]).toEqual([400, 'invalid_request', 'moderation_hook.failure_mode']);
    expect((await t.api.admin('get', `/admin/projects/${id}`)).body.moderation_hook).toBeNull();

    const made = await t.api.admin('patch', `/admin/projects/${id}`, {
      moderation_hook: { url: 'https://moderation.example.com/hook', failure_mode: 'fail_open' },
    });
    expect(made.body.moderation_hook).toEqual(
      expect.objectContaining({ timeout_ms: 2000, failure_mode: 'fail_open', secret: expect.stringMatching(/^whsec_/) }),
    );
  });
});
