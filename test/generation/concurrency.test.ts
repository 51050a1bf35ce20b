import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

describe('credit reservation under concurrency', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('50 parallel requests against 10 credits: exactly 10 succeed, 40 get quota_exceeded', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10, rate_limit_rpm: 1000 });
    const results = await Promise.all(Array.from({ length: 50 }, () => t.api.client(key, localRequest())));
    const statuses = results.map((r) => r.status);
    expect(results.filter((r) => r.status !== 200 && r.status !== 402).map((r) => [r.status, r.body])).toEqual([]);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 402)).toHaveLength(40);
    const record = await t.api.admin('get', `/admin/keys/${id}`);
    expect(record.body).toMatchObject({ credits_used: 10, credits_remaining: 0 });
    const rows = await t.gateway.database.db.selectFrom('generations').select(['status']).where('key_id', '=', id).execute();
    expect(rows.filter((r) => r.status === 'succeeded')).toHaveLength(10);
    expect(rows).toHaveLength(10);
  });

  it('RPM is exact under a burst: with rpm 20, 60 parallel requests let exactly 20 through', async () => {
    const { key } = await t.createKey({ credits_quota: 1000, rate_limit_rpm: 20 });
    const results = await Promise.all(Array.from({ length: 60 }, () => t.api.client(key, localRequest())));
    expect(results.filter((r) => r.status === 200)).toHaveLength(20);
    expect(results.filter((r) => r.status === 429)).toHaveLength(40);
  });
});
