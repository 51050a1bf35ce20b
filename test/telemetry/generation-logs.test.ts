import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { closedPort } from '../helpers/channels';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

const UPSTREAM_KEY = 'sk-openai-logs-upstream';

type Line = Record<string, unknown> & { msg: string };

/**
 * "Why did my generation fail?": each failed or refused generation is one warn line naming the
 * request, the generation, the key and its project, the model, provider and channel, the error code
 * and the kind of upstream failure, never the prompt. The operator's other lines: a short
 * configuration summary first, "stopped" last.
 */
describe('logs that explain', () => {
  let fake: FakeOpenAIImages;
  let t: TestGateway;
  let closed = false;

  beforeAll(async () => {
    fake = await startFakeOpenAIImages({ apiKey: UPSTREAM_KEY });
    t = await startTestGateway({ OPENAI_API_KEY: UPSTREAM_KEY, OPENAI_BASE_URL: `${fake.url}/v1`, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  });
  afterAll(async () => {
    if (!closed) await t.close();
    await fake.close();
  });

  const lines = (): Line[] => t.logs.map((line) => JSON.parse(line) as Line);
  const explaining = (requestId: string) =>
    lines().filter((line) => line.request_id === requestId && (line.msg === 'generation failed' || line.msg === 'generation refused'));
  const project = async (overrides: Record<string, unknown> = {}) => {
    const res = await t.api.admin('post', '/admin/projects', { name: 'logs', owner: 'o', credits_quota: 100_000, quota_period_days: 30, ...overrides });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };

  it('an upstream failure: one line with every id, the model, provider, channel, code and the upstream kind', async () => {
    const projectId = await project();
    const { id: keyId, key } = await t.createKey({ project_id: projectId, allowed_providers: ['openai'], credits_quota: 100_000 });
    const prompt = 'a quota-less harbour 51c0 [fail:insufficient_quota]';
    const res = await t.api.client(key, { prompt, model: 'gpt-image-1', size: '1024x1024', quality: 'low' });
    expect(res.status).toBeGreaterThanOrEqual(400);
    const requestId = res.headers['x-request-id'] as string;
    const [line, ...more] = explaining(requestId);
    expect(more).toEqual([]);
    expect(line).toMatchObject({
      level: 40,
      msg: 'generation failed',
      request_id: requestId,
      generation_id: expect.stringMatching(/^gen_/),
      key_id: keyId,
      project_id: projectId,
      model: 'gpt-image-1',
      provider: 'openai',
      channel_id: 'chn_envOpenai',
      error_code: res.body.error.code,
      upstream_kind: 'account',
      upstream_status: 429,
    });
    expect(t.logs.join('\n')).not.toContain('quota-less harbour');
  });

  it('a refusal at admission: one line with the request, key, model and code (no generation was made)', async () => {
    const { id: keyId, key } = await t.createKey({ allowed_providers: ['local'] });
    const res = await t.api.client(key, { prompt: 'a refused lighthouse 9e21', model: 'gpt-image-1', size: '1024x1024' });
    expect(res.status).toBe(403);
    const requestId = res.headers['x-request-id'] as string;
    const [line, ...more] = explaining(requestId);
    expect(more).toEqual([]);
    expect(line).toMatchObject({
      msg: 'generation refused',
      request_id: requestId,
      key_id: keyId,
      project_id: null,
      model: 'gpt-image-1',
      provider: 'openai',
      error_code: res.body.error.code,
    });
    expect(line?.generation_id).toBeUndefined();
    expect(t.logs.join('\n')).not.toContain('refused lighthouse');
  });

  it("a moderation hook's failure names the request it was asked for", async () => {
    const projectId = await project({ moderation_hook: { url: `https://127.0.0.1:${await closedPort()}/hook`, failure_mode: 'fail_open' } });
    const { key } = await t.createKey({ project_id: projectId });
    const res = await t.api.client(key, localRequest({ prompt: 'a hooked lighthouse 0b7d' }));
    expect(res.status).toBe(200);
    const failure = lines().find((line) => line.msg.startsWith('moderation hook failed') && line.project_id === projectId);
    expect(failure?.request_id).toBe(res.headers['x-request-id']);
    expect(t.logs.join('\n')).not.toContain('hooked lighthouse');
  });

  it('starts with a short configuration summary and ends with "stopped"', async () => {
    const [first] = t.logs;
    expect(JSON.parse(first as string)).toMatchObject({
      msg: 'configuration',
      config: { listen: '127.0.0.1:0', rate_limit_store: expect.any(String), traces: 'off' },
    });
    expect((first as string).length).toBeLessThan(1500);
    await t.close();
    closed = true;
    expect(lines().at(-1)?.msg).toBe('stopped');
  });
});
