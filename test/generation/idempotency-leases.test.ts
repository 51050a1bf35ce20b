import { sql } from 'kysely';
import { Client } from 'pg';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { claimIdempotencyKey } from '../../src/idempotency/idempotency.repository';
import { startArkGateway } from '../helpers/ark-gateway';
import { testEngine } from '../helpers/test-database';
import { type TestGateway, localRequest } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * An Idempotency-Key's claim is a lease, renewed while its request runs: a claim nobody renews (its
 * process was killed, or the removal of its record after a database outage never reached the
 * database) is taken over by a retry once the lease lapses, instead of answering 409
 * `idempotency_key_in_use` until the sweeper drops it.
 */
describe('Idempotency-Key claims are leases', () => {
  const LEASE_MS = 600;
  let ark: FakeImagesApi;
  let t: TestGateway;
  beforeAll(async () => {
    // A short statement deadline: the outage below is a lock held past it.
    ({ t, ark } = await startArkGateway({ env: { IDEMPOTENCY_LEASE_MS: String(LEASE_MS), DB_STATEMENT_TIMEOUT_MS: '1000' } }));
  });
  afterAll(() => t.close());

  const generate = (key: string, idem: string, body: Record<string, unknown>) =>
    t.api.send('post', '/images/generate', { body, headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': idem } });
  const record = (idem: string) =>
    t.gateway.database.db.selectFrom('idempotency_keys').selectAll().where('idempotency_key', '=', idem).executeTakeFirstOrThrow();
  let probes = 0;
  /** The fingerprint the gateway gives `body` (after validation fills its defaults), from a request of another key. */
  const fingerprintOf = async (body: Record<string, unknown>) => {
    const idem = `probe-${++probes}`;
    expect((await generate((await t.createKey()).key, idem, body)).status).toBe(200);
    return (await record(idem)).request_hash;
  };

  it('a claim left by a process that died answers 409 until its lease lapses, then a retry takes it over and runs once', async () => {
    const { id, key } = await t.createKey();
    const body = localRequest();
    const now = t.clock.now();
    // What a replica SIGKILLed mid-request leaves: its claim, renewed by nobody from now on.
    await claimIdempotencyKey(t.gateway.database.db, {
      scope: `key:${id}`,
      idempotency_key: 'killed-1',
      request_hash: await fingerprintOf(body),
      created_at: now,
      lease_owner: 'replica-killed:1234:0:1',
      lease_expires_at: now + 60_000,
    });
    const early = await generate(key, 'killed-1', body);
    expect([early.status, early.body.error?.code]).toEqual([409, 'idempotency_key_in_use']);

    t.clock.advanceMs(60_001);
    const retry = await generate(key, 'killed-1', body);
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    const replay = await generate(key, 'killed-1', body);
    expect([replay.status, replay.headers['idempotent-replayed'], replay.body.id]).toEqual([200, 'true', retry.body.id]);
    expect(await t.api.creditsUsed(id)).toBe(1);
  });

  it('a lapsed claim is taken over only by the same request: another body is still 422', async () => {
    const { id, key } = await t.createKey();
    const now = t.clock.now();
    await claimIdempotencyKey(t.gateway.database.db, {
      scope: `key:${id}`,
      idempotency_key: 'killed-2',
      request_hash: await fingerprintOf(localRequest()),
      created_at: now,
      lease_owner: 'replica-killed:1234:0:2',
      lease_expires_at: now,
    });
    const other = await generate(key, 'killed-2', localRequest({ prompt: 'another picture' }));
    expect([other.status, other.body.error?.code]).toEqual([422, 'idempotency_key_reused']);
  });

  it('the claim of a request still running is renewed: past several leases a retry is still 409', async () => {
    const { key } = await t.createKey({ allowed_providers: ['jimeng'] });
    const body = { prompt: 'held while the claim is renewed [hold:renewed]', model: 'jimeng-4.5' };
    const first = generate(key, 'renewed-1', body);
    await ark.whenHeld('renewed');
    const claimed = await record('renewed-1');
    // Renewed past three of its leases (real time: the renewal runs on its own timer).
    await until(async () => Number((await record('renewed-1')).lease_expires_at) > Number(claimed.created_at) + 3 * LEASE_MS, 'the claim renewed', 10_000);
    const retry = await generate(key, 'renewed-1', body);
    expect([retry.status, retry.body.error?.code]).toEqual([409, 'idempotency_key_in_use']);
    ark.releaseHeld('renewed');
    expect((await first).status).toBe(200);
    expect((await generate(key, 'renewed-1', body)).headers['idempotent-replayed']).toBe('true');
  });

  it('a database outage that fails the first request and its record removal: once the lease lapses the retry is served, not 409', async () => {
    const { key } = await t.createKey({ allowed_providers: ['jimeng'] });
    const body = { prompt: 'settled during an outage [hold:outage]', model: 'jimeng-4.5' };
    const first = generate(key, 'outage-1', body);
    await ark.whenHeld('outage');

    // The outage: on SQLite the file refuses writes; on PostgreSQL the tables are locked past the statement deadline.
    const outage = await startOutage(t);
    try {
      ark.releaseHeld('outage');
      const failed = await first;
      expect([failed.status, failed.body.error?.code]).toEqual([503, 'dependency_unavailable']);
      await until(() => t.logs.some((line) => line.includes('could not remove the idempotency record')), 'the removal failed');
    } finally {
      await outage.end();
    }
    expect((await record('outage-1')).state).toBe('running');

    // Nobody renews the claim any more: once its lease lapses, the same request is served.
    t.clock.advanceMs(LEASE_MS + 1);
    const retry = generate(key, 'outage-1', body);
    await ark.whenHeld('outage');
    ark.releaseHeld('outage');
    const served = await retry;
    expect(served.status).toBe(200);
    expect((await generate(key, 'outage-1', body)).headers['idempotent-replayed']).toBe('true');
  });
});

async function startOutage(t: TestGateway): Promise<{ end(): Promise<void> }> {
  if (testEngine === 'sqlite') {
    const pragma = (text: string) => sql.raw(text).execute(t.gateway.database.db);
    await pragma('PRAGMA query_only = 1');
    return { end: () => pragma('PRAGMA query_only = 0').then(() => undefined) };
  }
  const locker = new Client({ connectionString: t.databaseUrl });
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE generations, idempotency_keys IN ACCESS EXCLUSIVE MODE');
  return {
    async end() {
      await locker.query('COMMIT');
      await locker.end();
    },
  };
}
