import { claimIdempotencyKey } from '../../src/idempotency/idempotency.repository';
import { ADMIN_SECRET, type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * The two answers that carry a moderation hook's secret, under an Idempotency-Key: a retried
 * `rotateProjectModerationHookSecret` replays the first rotation (the same secret, the overlap it
 * started kept) instead of rotating again, and a retried `createProject` replays its answer, secret
 * included, as `createKey`'s replay does; the stored copy is sealed (docs/operators/projects.md).
 */
describe('moderation hook secrets under an Idempotency-Key', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  });
  afterAll(() => t.close());

  const hook = { url: 'https://127.0.0.1:9/moderate', failure_mode: 'fail_closed' };
  let projects = 0;
  const createProject = (idem: string, body?: Record<string, unknown>) =>
    t.api.send('post', '/admin/projects', {
      body: body ?? { name: `hooked ${++projects}`, owner: 'o', credits_quota: 100, quota_period_days: 30, moderation_hook: hook },
      headers: { Authorization: `Bearer ${ADMIN_SECRET}`, 'Idempotency-Key': idem },
    });
  const rotate = (projectId: string, idem: string, body: Record<string, unknown> = { overlap_seconds: 3600 }) =>
    t.api.send('post', `/admin/projects/${projectId}/moderation-hook/rotate-secret`, {
      body,
      headers: { Authorization: `Bearer ${ADMIN_SECRET}`, 'Idempotency-Key': idem },
    });
  const storedRows = (idem: string) => t.gateway.database.db.selectFrom('idempotency_keys').selectAll().where('idempotency_key', '=', idem).execute();

  it('a retried rotation replays the first one: the same secret, the same overlap, one rotation audited', async () => {
    const created = await createProject(`create-${Date.now()}`);
    expect(created.status).toBe(201);
    const projectId = created.body.id as string;
    const first = await rotate(projectId, 'rotate-1');
    expect(first.status).toBe(200);
    const secret = first.body.moderation_hook.secret as string;
    expect(secret).not.toBe(created.body.moderation_hook.secret);
    const overlapEnd = first.body.moderation_hook.previous_secret_expires_at as string;

    const retry = await rotate(projectId, 'rotate-1');
    expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(retry.body.moderation_hook).toMatchObject({ secret, previous_secret_expires_at: overlapEnd });
    // Nothing rotated again: the project still has the overlap the first call started.
    const project = await t.api.admin('get', `/admin/projects/${projectId}`);
    expect(project.body.moderation_hook.previous_secret_expires_at).toBe(overlapEnd);
    const audited = await t.api.admin('get', `/admin/audit-events?target=${projectId}&action=project.moderation_hook_secret_rotated`);
    expect(audited.body.data).toHaveLength(1);
    // The stored answer is sealed: the secret is nowhere readable in the database.
    expect(JSON.stringify(await storedRows('rotate-1'))).not.toContain(secret);

    const other = await rotate(projectId, 'rotate-1', { overlap_seconds: 60 });
    expect([other.status, other.body.error?.code]).toEqual([422, 'idempotency_key_reused']);
  });

  it('a rotation whose first request still runs (its claim held by another replica) is 409', async () => {
    const projectId = (await createProject(`create-held-${Date.now()}`)).body.id as string;
    // The fingerprint of this request, as the gateway computes it: from a rotation under another key.
    expect((await rotate(projectId, 'rotate-probe')).status).toBe(200);
    const [probe] = await storedRows('rotate-probe');
    const now = t.clock.now();
    await claimIdempotencyKey(t.gateway.database.db, {
      scope: 'admin',
      idempotency_key: 'rotate-held',
      request_hash: probe!.request_hash,
      created_at: now,
      lease_owner: 'replica-b:42:0:1',
      lease_expires_at: now + 60_000,
    });
    const res = await rotate(projectId, 'rotate-held');
    expect([res.status, res.body.error?.code]).toEqual([409, 'idempotency_key_in_use']);
  });

  it('a retried createProject replays its answer, the hook secret included, stored sealed', async () => {
    const idem = `create-replay-${Date.now()}`;
    const body = { name: 'replayed', owner: 'o', credits_quota: 100, quota_period_days: 30, moderation_hook: hook };
    const first = await createProject(idem, body);
    const retry = await createProject(idem, body);
    expect(first.status).toBe(201);
    expect([retry.status, retry.headers['idempotent-replayed'], retry.body.id]).toEqual([201, 'true', first.body.id]);
    expect(retry.body.moderation_hook.secret).toBe(first.body.moderation_hook.secret);
    expect(JSON.stringify(await storedRows(idem))).not.toContain(first.body.moderation_hook.secret);
  });
});
