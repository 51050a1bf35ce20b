import { Client } from 'pg';
import { openDatabase } from '../../src/db/database';
import { sweepOnce } from '../../src/maintenance/sweeper';
import { countIn as count, expectBooksBalance, expectOnlyServedOrDependency503, imagesServed, phasedTraffic } from '../helpers/outage-traffic';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { ThrowawayPostgres } from '../helpers/throwaway-servers';
import { until } from '../helpers/until';

describe('PostgreSQL restarts while clients are sending', () => {
  let cluster: ThrowawayPostgres;
  let t: TestGateway;

  beforeAll(async () => {
    cluster = await ThrowawayPostgres.start();
  });
  afterAll(async () => {
    await t?.close();
    await cluster.destroy();
  });

  it('every request during the outage gets 503 dependency_unavailable, /readyz follows, recovery by itself, books balance', async () => {
    t = await startTestGateway({ DATABASE_URL: cluster.url, READINESS_FAILURE_WINDOW_MS: '300', DB_CONNECT_TIMEOUT_MS: '1000' });
    const { id, key } = await t.createKey({ credits_quota: 100_000, rate_limit_rpm: 100_000 });
    const { traffic, setPhase } = phasedTraffic(t, key);
    await traffic.until((r) => count(r, 'before', 200) >= 10, 'traffic before the outage');

    setPhase('stopping');
    await cluster.stop();
    setPhase('down');
    await traffic.until((r) => count(r, 'down', 503) >= 20, '503s during the outage');
    const notReady = await t.api.send('get', '/readyz');
    expect([notReady.status, notReady.body.error.dependency]).toEqual([503, 'database']);
    expect((await t.internal.send('get', '/readyz')).status).toBe(503);
    // Admin, client reads and internal operations answer the same documented 503 (their responses are checked against the spec).
    const asClient = { headers: { Authorization: `Bearer ${key}` } };
    for (const res of [
      await t.api.admin('get', '/admin/keys'),
      await t.api.send('get', '/generations', asClient),
      await t.api.send('get', '/generations/gen_unknown0', asClient),
      await t.api.send('post', '/generations/gen_unknown0/cancel', asClient),
      await t.internal.service(
        'get',
        `/api/v1/creative/usage?from=${encodeURIComponent('2026-01-01T00:00:00Z')}&to=${encodeURIComponent('2027-01-01T00:00:00Z')}`,
      ),
    ]) {
      expect([res.status, res.body.error.code, res.body.error.dependency, res.headers['retry-after']]).toEqual([
        503,
        'dependency_unavailable',
        'database',
        '2',
      ]);
    }

    setPhase('starting');
    await cluster.start();
    setPhase('back');
    await traffic.until((r) => count(r, 'back', 200) >= 10, 'traffic after PostgreSQL returned');
    await until(async () => (await t.api.send('get', '/readyz')).status === 200, '/readyz 200 after PostgreSQL returned', 20_000);
    const results = await traffic.stop();

    // Sent and answered while PostgreSQL was down: none served (a request still waiting for a
    // connection when it returns may be, within DB_CONNECT_TIMEOUT_MS).
    expect(results.filter((r) => r.phase === 'down' && r.answeredIn === 'down' && r.status === 200)).toEqual([]);
    expectOnlyServedOrDependency503(results);

    // Reservations cut by the outage are released by the sweeper (here run as if its deadline had passed).
    const database = openDatabase(cluster.url);
    try {
      await sweepOnce({ db: database.db, clock: { now: () => Date.now() + 3_600_000 }, staleAfterMs: { local: 0 } });
    } finally {
      await database.close();
    }
    const served = imagesServed(results);
    const client = new Client({ connectionString: cluster.url });
    await client.connect();
    const pending = await client.query(`SELECT count(*)::int AS n FROM generations WHERE status IN ('queued', 'running')`);
    const succeeded = await client.query(`SELECT coalesce(sum(images), 0)::int AS n FROM generations WHERE status = 'succeeded' AND key_id = $1`, [id]);
    await client.end();
    expect(pending.rows[0].n).toBe(0);
    expect(succeeded.rows[0].n).toBe(served);
    await expectBooksBalance(t, id, results);
    expect(t.logs.filter((line) => line.includes('unhandled error'))).toEqual([]);
  });
});
