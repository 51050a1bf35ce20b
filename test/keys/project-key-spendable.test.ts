import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/** A key in a project is told what it can still spend and send: the smaller of its own book and limit and its project's. */
describe('what a key in a project is told it has left', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const newProject = async (fields: Record<string, unknown>) => {
    const res = await t.api.admin('post', '/admin/projects', { name: 'studio', owner: 'studio@example.com', quota_period_days: 30, ...fields });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };

  it("usage.credits_remaining is the project's when the project has less left than the key; its 402 says how many are left", async () => {
    const project = await newProject({ credits_quota: 2 });
    const { key } = await t.createKey({ credits_quota: 300, project_id: project });
    const first = await t.api.client(key, localRequest());
    expect(first.status).toBe(200);
    expect(first.body.usage).toMatchObject({ credits_charged: 1, credits_remaining: 1 });
    const second = await t.api.client(key, localRequest());
    expect(second.body.usage).toMatchObject({ credits_charged: 1, credits_remaining: 0 });
    const refused = await t.api.client(key, localRequest());
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe('project_quota_exceeded');
    expect(refused.body.error.message).toMatch(new RegExp(`^This request needs 1 credit; project ${project} has 0 of its 2 left this period, which ends at `));
  });

  it("the key's own book when it has less left than its project; the key's 402 says how many are left", async () => {
    const project = await newProject({ credits_quota: 1000 });
    const { key } = await t.createKey({ credits_quota: 3, project_id: project });
    const made = await t.api.client(key, localRequest({ n: 2 }));
    expect(made.body.usage).toMatchObject({ credits_charged: 2, credits_remaining: 1 });
    const refused = await t.api.client(key, localRequest({ n: 2 }));
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe('quota_exceeded');
    expect(refused.body.error.message).toMatch(/^This request needs 2 credits; the key has 1 of its 3 left this period, which ends at /);
  });

  it("rate-limit headers: both policies, and the X-RateLimit trio gives the project's when it binds first", async () => {
    const project = await newProject({ credits_quota: 1000, rate_limit_rpm: 2 });
    const { key } = await t.createKey({ rate_limit_rpm: 100, project_id: project });
    const first = await t.api.client(key, localRequest());
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe('"rpm";q=100;w=60, "project-rpm";q=2;w=60');
    expect(first.headers['ratelimit']).toMatch(/^"rpm";r=99;t=\d+, "project-rpm";r=1;t=\d+$/);
    expect([first.headers['x-ratelimit-limit'], first.headers['x-ratelimit-remaining']]).toEqual(['2', '1']);
    await t.api.client(key, localRequest());
    const refused = await t.api.client(key, localRequest());
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('project_rate_limited');
    expect(refused.body.error.message).toMatch(new RegExp(`^Rate limit of 2 requests per minute of project ${project} reached`));
    expect([refused.headers['x-ratelimit-limit'], refused.headers['x-ratelimit-remaining']]).toEqual(['2', '0']);
    // A refusal before the count (an unknown model) looks both up.
    const unknown = await t.api.client(key, localRequest({ model: 'no-such-model' }));
    expect(unknown.status).toBe(404);
    expect(unknown.headers['ratelimit-policy']).toBe('"rpm";q=100;w=60, "project-rpm";q=2;w=60');
    expect(unknown.headers['x-ratelimit-remaining']).toBe('0');
  });

  it('a limit of one: "1 request per minute"', async () => {
    const { key } = await t.createKey({ rate_limit_rpm: 1 });
    expect((await t.api.client(key, localRequest())).status).toBe(200);
    const refused = await t.api.client(key, localRequest());
    expect(refused.status).toBe(429);
    expect(refused.body.error.message).toMatch(/^Rate limit of 1 request per minute reached; retry in \d+ s\.$/);
  });
});
