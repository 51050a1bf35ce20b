import { sweepOnce } from '../../src/maintenance/sweeper';
import { bearer } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { bucketStartOf } from '../../src/usage/usage-query';

const DAY = 86_400_000;
const HOUR = 3_600_000;

describe('GENERATION_RETENTION_DAYS: the sweeper deletes old settled generation rows; usage rollups stay (getUsageReport)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // The worker does not poll during the test: the row it sets back to queued stays a row, not a job.
    t = await startTestGateway({ GENERATION_POLL_MS: '600000' });
  });
  afterAll(() => t.close());

  it('deletes settled rows (and attempt rows) past retention, keeps newer and active ones; the usage report still counts the deleted', async () => {
    const db = t.gateway.database.db;
    const { id, key } = await t.createKey();
    const madeAt = t.clock.now();
    for (const prompt of ['old one', 'old two']) expect((await t.api.client(key, localRequest({ prompt }))).status).toBe(200);
    const old = await db.selectFrom('generations').select('id').where('key_id', '=', id).execute();
    // An active row as old as they are: never deleted.
    await db.updateTable('generations').set({ status: 'queued' }).where('id', '=', old[1]!.id).execute();
    t.clock.advanceDays(31);
    expect((await t.api.client(key, localRequest({ prompt: 'new' }))).status).toBe(200);

    const result = await sweepOnce({ db, clock: t.clock, staleAfterMs: { local: HOUR }, generationRetentionMs: 30 * DAY });
    expect(result.generationsPruned).toBe(1);
    const left = await db.selectFrom('generations').select(['id', 'status']).where('key_id', '=', id).execute();
    expect(left).toHaveLength(2);
    expect(left.map((row) => row.id)).not.toContain(old[0]!.id);
    expect(await db.selectFrom('generation_attempts').select('generation_id').where('generation_id', '=', old[0]!.id).execute()).toEqual([]);
    // Without a retention nothing goes.
    expect((await sweepOnce({ db, clock: t.clock, staleAfterMs: { local: HOUR } })).generationsPruned).toBe(0);

    const from = new Date(madeAt - (madeAt % HOUR)).toISOString();
    const to = new Date(bucketStartOf(t.clock.now(), 'hour') + HOUR).toISOString();
    const res = await t.api.send('get', `/admin/usage?from=${from}&to=${to}&key_id=${id}`, { headers: bearer(ADMIN_SECRET) });
    expect(res.status).toBe(200);
    // Both old successes (one deleted, one set back to queued by the test) and the new one.
    expect(res.body.data[0]).toMatchObject({ requests: 3, succeeded: 3, credits_charged: 3 });
  });
});
