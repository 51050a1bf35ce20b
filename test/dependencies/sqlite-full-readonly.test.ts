import { sql } from 'kysely';
import { expectBooksBalance, expectOnlyServedOrDependency503, imagesServed, phasedTraffic } from '../helpers/outage-traffic';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { Traffic } from '../helpers/throwaway-servers';
import { until } from '../helpers/until';

interface Fault {
  name: string;
  /** The SQLite result code the log must show (not the rollback error that used to mask it). */
  cause: RegExp;
  /** A full file still takes the release (it frees index space); a read-only one takes nothing until repaired. */
  releasesWhileBroken: boolean;
  inject(t: TestGateway): Promise<void>;
  repair(t: TestGateway): Promise<void>;
}

const pragma = async (t: TestGateway, statement: string) => {
  await sql.raw(statement).execute(t.gateway.database.db);
};

const faults: Fault[] = [
  {
    // SQLITE_FULL, as from a full disk: the file may not grow by a single page.
    name: 'disk full',
    cause: /SQLITE_FULL/,
    releasesWhileBroken: true,
    inject: async (t) => {
      const rows = await sql<{ page_count: number }>`PRAGMA page_count`.execute(t.gateway.database.db);
      await pragma(t, `PRAGMA max_page_count = ${rows.rows[0]!.page_count}`);
    },
    repair: (t) => pragma(t, 'PRAGMA max_page_count = 1073741823'),
  },
  {
    // SQLITE_READONLY, as from a database file that became read-only.
    name: 'read-only database',
    cause: /SQLITE_READONLY/,
    releasesWhileBroken: false,
    inject: (t) => pragma(t, 'PRAGMA query_only = 1'),
    repair: (t) => pragma(t, 'PRAGMA query_only = 0'),
  },
];

describe.each(faults)('SQLite $name while clients are sending', (fault) => {
  let t: TestGateway;
  afterEach(() => t.close());

  it('503 dependency_unavailable (never 500), /readyz 503 on both listeners, the real cause logged, reservations released at once, recovery', async () => {
    t = await startTestGateway({ READINESS_FAILURE_WINDOW_MS: '300' });
    const { id, key } = await t.createKey({ credits_quota: 100_000, rate_limit_rpm: 100_000 });
    const { traffic, setPhase } = phasedTraffic(t, key);
    await traffic.until((r) => r.filter((x) => x.status === 200).length >= 10, 'traffic before the fault');

    await fault.inject(t);
    setPhase('broken');
    await traffic.until((r) => r.filter((x) => x.phase === 'broken' && x.status === 503).length >= 20, '503s while the database refuses writes');
    const publicReady = await t.api.send('get', '/readyz');
    expect([publicReady.status, publicReady.body.error?.dependency]).toEqual([503, 'database']);
    expect((await t.internal.send('get', '/readyz')).status).toBe(503);
    setPhase('stopped');
    const brokenResults = await traffic.stop();

    // No sweep has run: what the outage left reserved is released as soon as a write goes through.
    const nothingPending = async () =>
      (await t.gateway.database.db.selectFrom('generations').where('status', 'in', ['queued', 'running']).select('id').execute()).length === 0;
    if (fault.releasesWhileBroken) await until(nothingPending, 'reservations released while the disk is full', 20_000);
    setPhase('repairing');
    await fault.repair(t);
    await until(nothingPending, 'reservations released once writes go through', 20_000);
    await expectBooksBalance(t, id, brokenResults);
    expectOnlyServedOrDependency503(brokenResults);
    expect(t.logs.some((line) => fault.cause.test(line))).toBe(true);
    expect(t.logs.filter((line) => line.includes('cannot rollback') || line.includes('unhandled error'))).toEqual([]);

    setPhase('repaired');
    const after = new Traffic(async () => (await t.api.client(key, localRequest())).status, 2);
    await after.until((statuses) => statuses.filter((s) => s === 200).length >= 10, 'traffic after the repair');
    await until(async () => (await t.api.send('get', '/readyz')).status === 200, '/readyz 200 after the repair', 20_000);
    const statuses = await after.stop();
    expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
    const total = imagesServed(brokenResults) + statuses.filter((s) => s === 200).length;
    expect(await t.api.creditsUsed(id)).toBe(total);
  });
});
