import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/**
 * A project's prompt rules (issue #38 §2): its keys' requests are checked against the project's rules
 * with the key's own added, before anything is counted against the quota or sent; a change to the
 * project's rules holds from the next request.
 */
describe('project prompt rules', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  async function projectWith(promptRules: unknown): Promise<string> {
    const res = await t.api.admin('post', '/admin/projects', { name: 'p', owner: 'o', credits_quota: 1000, quota_period_days: 30, prompt_rules: promptRules });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  it("a key's prompt is checked against its project's rules and its own; each refusal names the rule that refused it", async () => {
    const projectId = await projectWith([{ id: 'gr_project_term', kind: 'blocked_term', term: 'lighthouse' }]);
    const { id: keyId, key } = await t.createKey({ project_id: projectId, prompt_rules: [{ id: 'gr_key_term', kind: 'blocked_term', term: 'harbour' }] });
    const before = await t.api.creditsUsed(keyId);

    const byProject = await t.api.client(key, localRequest({ prompt: 'a LIGHTHOUSE at dawn' }));
    expect([byProject.status, byProject.body.error.code, byProject.body.error.param]).toEqual([400, 'prompt_blocked', 'prompt']);
    expect(byProject.body.error.message).toContain('gr_project_term');
    expect(byProject.body.error.message).not.toContain('LIGHTHOUSE');

    const byKey = await t.api.client(key, localRequest({ prompt: 'a quiet harbour' }));
    expect([byKey.status, byKey.body.error.code]).toEqual([400, 'prompt_blocked']);
    expect(byKey.body.error.message).toContain('gr_key_term');

    expect(await t.api.creditsUsed(keyId)).toBe(before);
    expect((await t.api.client(key, localRequest({ prompt: 'a field of poppies' }))).status).toBe(200);
  });

  it("the stricter max_length of the two applies; the project's rules do not reach a key outside it", async () => {
    const projectId = await projectWith([{ id: 'gr_short', kind: 'max_length', max: 10 }]);
    const { key: inside } = await t.createKey({ project_id: projectId, prompt_rules: [{ id: 'gr_long', kind: 'max_length', max: 100 }] });
    const { key: outside } = await t.createKey();
    const prompt = 'twelve chars';
    const refused = await t.api.client(inside, localRequest({ prompt }));
    expect([refused.status, refused.body.error.code]).toEqual([400, 'prompt_blocked']);
    expect(refused.body.error.message).toContain('gr_short');
    expect((await t.api.client(outside, localRequest({ prompt }))).status).toBe(200);
  });

  it("a change of the project's rules holds from the next request; the resource shows them with their ids", async () => {
    const projectId = await projectWith(null);
    const { key } = await t.createKey({ project_id: projectId });
    expect((await t.api.client(key, localRequest({ prompt: 'a red balloon' }))).status).toBe(200);

    const updated = await t.api.admin('patch', `/admin/projects/${projectId}`, { prompt_rules: [{ kind: 'blocked_pattern', pattern: 'red\\s+balloon' }] });
    expect(updated.status).toBe(200);
    const [rule] = updated.body.prompt_rules as Array<{ id: string; kind: string }>;
    expect(rule).toEqual({ id: expect.stringMatching(/^gr_/), kind: 'blocked_pattern', pattern: 'red\\s+balloon' });
    const refused = await t.api.client(key, localRequest({ prompt: 'a red   balloon' }));
    expect([refused.status, refused.body.error.code]).toEqual([400, 'prompt_blocked']);
    expect(refused.body.error.message).toContain(rule!.id);

    expect((await t.api.admin('patch', `/admin/projects/${projectId}`, { prompt_rules: null })).body.prompt_rules).toBeNull();
    expect((await t.api.client(key, localRequest({ prompt: 'a red balloon' }))).status).toBe(200);
  });

  it('rules that cannot be kept are refused when set: 400 invalid_request naming the field', async () => {
    const res = await t.api.admin('post', '/admin/projects', {
      name: 'p',
      owner: 'o',
      credits_quota: 1,
      quota_period_days: 1,
      prompt_rules: [
        { kind: 'max_length', max: 5 },
        { kind: 'max_length', max: 6 },
      ],
    });
    expect([res.status, res.body.error.code, res.body.error.param]).toEqual([400, 'invalid_request', 'prompt_rules[1].kind']);
  });
});
