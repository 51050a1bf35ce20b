import { currentPeriodStart } from '../../src/keys/rules/quota-period';
import { DAY_MS } from '../../src/shared/clock';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

describe('quota periods', () => {
  it('period k starts at created_at + k * quota_period_days', () => {
    const created = Date.parse('2026-01-01T00:00:00Z');
    expect(currentPeriodStart(created, 7, created)).toBe(created);
    expect(currentPeriodStart(created, 7, created + 7 * DAY_MS - 1)).toBe(created);
    expect(currentPeriodStart(created, 7, created + 7 * DAY_MS)).toBe(created + 7 * DAY_MS);
    expect(currentPeriodStart(created, 7, created + 23 * DAY_MS)).toBe(created + 21 * DAY_MS);
  });

  describe('through the API', () => {
    let t: TestGateway;
    beforeAll(async () => {
      t = await startTestGateway();
    });
    afterAll(() => t.close());

    it('refills lazily and exactly at the period boundary, with no cron', async () => {
      const { id, key, record } = await t.createKey({ credits_quota: 2, quota_period_days: 7 });
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
      const refused = await t.api.client(key, localRequest());
      expect(refused.body.error.period_resets_at).toBe(record.period_resets_at);

      t.clock.advanceDays(7);
      const before = await t.api.admin('get', `/admin/keys/${id}`);
      expect(before.body).toMatchObject({ credits_used: 0, credits_remaining: 2, period_started_at: record.period_resets_at });
      expect((await t.api.client(key, localRequest())).status).toBe(200);
      const after = await t.api.admin('get', `/admin/keys/${id}`);
      expect(after.body.credits_used).toBe(1);
      expect(Date.parse(after.body.period_resets_at) - Date.parse(record.created_at as string)).toBe(14 * DAY_MS);

      // Several empty periods later usage is still per current period.
      t.clock.advanceDays(30);
      const later = await t.api.client(key, localRequest({ n: 2 }));
      expect(later.status).toBe(200);
      expect(later.body.usage.credits_remaining).toBe(0);
    });
  });
});
