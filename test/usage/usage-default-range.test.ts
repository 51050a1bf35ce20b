import { bearer } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { bucketStartOf } from '../../src/usage/usage-query';

const HOUR = 3_600_000;

/** GET /admin/usage without `from` (or `to`): the month so far, as docs/operators/usage-analytics.md says. */
describe('usage report: a range left out (getUsageReport)', () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway();
    const { key } = await t.createKey();
    expect((await t.api.client(key, localRequest())).status).toBe(200);
  });
  afterAll(() => t.close());

  const usage = (query: string) => t.api.send('get', `/admin/usage${query}`, { headers: bearer(ADMIN_SECRET) });

  it('without from and to: the calendar month so far, up to the end of the current hour', async () => {
    const now = t.clock.now();
    const res = await usage('?bucket=month');
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([expect.objectContaining({ bucket_start: new Date(bucketStartOf(now, 'month')).toISOString(), requests: 1 })]);
    expect((await usage('')).body.data[0].requests).toBe(1);
  });

  it('with to alone: from the start of the month of its last hour (an earlier month counts nothing here)', async () => {
    const month = bucketStartOf(t.clock.now(), 'month');
    const earlier = await usage(`?to=${new Date(month).toISOString()}&bucket=month`);
    expect(earlier.status).toBe(200);
    expect(earlier.body.data).toEqual([]);
  });

  it('with from alone: up to the end of the current hour', async () => {
    const hour = bucketStartOf(t.clock.now(), 'hour');
    const res = await usage(`?from=${new Date(hour).toISOString()}&bucket=hour`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([expect.objectContaining({ bucket_start: new Date(hour).toISOString(), requests: 1 })]);
    expect((await usage(`?from=${new Date(hour + HOUR).toISOString()}`)).body.error.param).toBe('to');
  });
});
