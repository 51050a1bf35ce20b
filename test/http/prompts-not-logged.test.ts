import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { sweepOnce } from '../../src/maintenance/sweeper';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Prompts never appear in the gateway's logs, at any level: every request below carries a marker in
 * its prompt, through each path that logs (success, a refusal by validation, by the key's prompt
 * rules, by the upstream's moderation, an upstream failure and retry, an asynchronous job, a cancel,
 * the internal API, reads of the generation resources that return the prompt, the sweep withholding
 * it), and no log line may contain it.
 */
const MARKER = 'zq-marker-7f3a91';
const ARK_KEY = 'ark-key-prompts-not-logged';

describe('prompts are not logged', () => {
  let t: TestGateway;
  let ark: FakeImagesApi;
  let key: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' });
    t = await startTestGateway({
      LOG_LEVEL: 'trace',
      ARK_API_KEY: ARK_KEY,
      ARK_BASE_URL: ark.url,
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '1',
      GENERATION_POLL_MS: '50',
    });
    ({ key } = await t.createKey({ allowed_providers: ['local', 'jimeng'], credits_quota: 10_000 }));
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
  });

  const generate = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.api.send('post', '/images/generate', { body: { response_format: 'b64_json', ...body }, headers: { Authorization: `Bearer ${key}`, ...headers } });

  it('no log line, at trace level, holds a prompt', async () => {
    expect((await generate({ prompt: `a lighthouse ${MARKER}`, model: 'local-1' })).status).toBe(200);
    expect((await generate({ prompt: `too big ${MARKER}`, model: 'local-1', size: '99999x99999' })).status).toBe(400);
    expect((await generate({ prompt: `ark ${MARKER}`, model: 'jimeng-4.5', size: '2048x2048' })).status).toBe(200);
    expect((await generate({ prompt: `refused ${MARKER} [error:InputTextSensitiveContentDetected:400]`, model: 'jimeng-4.5', size: '2048x2048' })).status).toBe(
      400,
    );
    expect((await generate({ prompt: `broken ${MARKER} [error:InternalServiceError:500]`, model: 'jimeng-4.5', size: '2048x2048' })).status).toBe(502);
    expect((await generate({ prompt: `busy once ${MARKER} [busy:1]`, model: 'jimeng-4.5', size: '2048x2048' })).status).toBe(200);
    const badField = await generate({ prompt: `bad field ${MARKER} [error:InvalidParameter:400]`, model: 'jimeng-4.5', size: '2048x2048' });
    expect(badField.status).toBe(502);
    const quoted = await generate({ prompt: `quoted ${MARKER} [quote-prompt:InternalServiceError:500]`, model: 'jimeng-4.5', size: '2048x2048' });
    expect(quoted.status).toBe(502);
    // Nor does the answer to the client quote it back from the upstream's message.
    expect(JSON.stringify(quoted.body)).not.toContain(MARKER);

    const queued = await generate({ prompt: `later ${MARKER}`, model: 'local-1' }, { Prefer: 'respond-async' });
    expect(queued.status).toBe(202);
    await until(
      async () => (await t.api.send('get', `/generations/${queued.body.id}`, { headers: { Authorization: `Bearer ${key}` } })).body.status === 'succeeded',
      'the async generation succeeded',
    );

    const held = await generate({ prompt: `held ${MARKER} [hold:c1]`, model: 'jimeng-4.5', size: '2048x2048' }, { Prefer: 'respond-async' });
    expect(held.status).toBe(202);
    await until(() => ark.requests.some((r) => String(r.prompt).includes('[hold:c1]')), 'the held call reached the upstream');
    expect((await t.api.send('post', `/generations/${held.body.id}/cancel`, { headers: { Authorization: `Bearer ${key}` } })).status).toBe(200);
    ark.releaseHeld();

    // Refused by the key's prompt rules (a blocked term, the marker itself).
    const { key: ruled } = await t.createKey({ prompt_rules: [{ kind: 'blocked_term', term: MARKER }] });
    const blocked = await t.api.client(ruled, { prompt: `blocked ${MARKER}`, model: 'local-1', size: '32x32' });
    expect([blocked.status, blocked.body.error.code]).toEqual([400, 'prompt_blocked']);

    // The internal API, a service's generation.
    const internal = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: `internal ${MARKER}`, model: 'local-1', size: '32x32' });
    expect(internal.status).toBe(200);

    // The resources that return the prompt while it is kept, the key holder's and an administrator's.
    const kept = await t.api.send('get', `/generations/${queued.body.id}`, { headers: { Authorization: `Bearer ${key}` } });
    expect(kept.body.prompt).toBe(`later ${MARKER}`);
    expect((await t.api.send('get', '/generations', { headers: { Authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await t.api.admin('get', `/admin/generations/${queued.body.id}`)).body.prompt).toBe(`later ${MARKER}`);

    // A project's policy withheld by the sweep.
    const project = await t.api.admin('post', '/admin/projects', {
      name: 'p',
      owner: 'o',
      credits_quota: 100,
      quota_period_days: 30,
      prompt_retention: 'hash',
    });
    const { key: inProject } = await t.createKey({ project_id: project.body.id, allowed_providers: ['local'] });
    expect((await t.api.client(inProject, { prompt: `hashed ${MARKER}`, model: 'local-1', size: '32x32' })).status).toBe(200);
    const swept = await sweepOnce({ db: t.gateway.database.db, clock: t.clock, staleAfterMs: { local: 3_600_000 }, promptRetention: 'full' });
    expect(swept.promptsWithheld).toBeGreaterThanOrEqual(1);

    expect(t.logs.length).toBeGreaterThan(10);
    // The marker itself reached the upstream: the test would see a leak.
    expect(ark.requests.some((r) => String(r.prompt).includes(MARKER))).toBe(true);
    expect(t.logs.filter((line) => line.includes(MARKER))).toEqual([]);
  });
});
