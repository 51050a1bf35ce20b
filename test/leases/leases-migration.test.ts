import { sql } from 'kysely';
import { ChannelLimits } from '../../src/channels/channel-limits';
import { openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { SqlLeaseStore } from '../../src/leases/sql-lease-store';
import { LeaseRateLimiter } from '../../src/ratelimit/lease-rate-limiter';
import { createThrowawayDatabase } from '../helpers/test-database';

describe('migration 0018 (one leases table) on a database in use', () => {
  it('moves every limit state over: the limits hold across the upgrade', async () => {
    const throwaway = await createThrowawayDatabase();
    const database = openDatabase(throwaway.url);
    try {
      await migrateToLatest(database.db as never, database.engine, '0017_admin_token_lineage_and_scopes');
      const now = 1_800_000_000_000;
      const db = database.db;
      // Key key_a: 3 requests in the last minute (one already out of it), a slot in flight.
      for (const at of [now - 70_000, now - 50_000, now - 20_000, now - 20_000])
        await sql`INSERT INTO rate_limit_hits (key_id, at) VALUES ('key_a', ${at})`.execute(db);
      await sql`INSERT INTO key_leases (lease_id, key_id, expires_at) VALUES ('lease_x', 'key_a', ${now + 30_000})`.execute(db);
      // Channel chn_a: a slot in flight, two calls of 4 and 0 images, cooling down; the probe lease held.
      await sql`INSERT INTO channels (id, name, provider, transport, base_url, models, priority, weight, status, timeout_ms,
        credentials_sealed, credentials_hint, created_at, updated_at, cooldown_until)
        VALUES ('chn_a', 'a', 'jimeng', 'ark', 'http://127.0.0.1:1', '[]', 0, 1, 'enabled', 1000, 'v1.none', '...', 0, 0, ${now + 15_000})`.execute(db);
      await sql`INSERT INTO channel_leases (lease_id, channel_id, expires_at) VALUES ('chl_1', 'chn_a', ${now + 5_000})`.execute(db);
      await sql`INSERT INTO channel_calls (channel_id, at, images) VALUES ('chn_a', ${now - 30_000}, 4), ('chn_a', ${now - 10_000}, 0)`.execute(db);
      await sql`INSERT INTO shared_leases (name, holder, expires_at) VALUES ('channel-probe', 'replica-a', ${now + 60_000})`.execute(db);

      await migrateToLatest(database.db as never, database.engine);
      const store = new SqlLeaseStore(db);
      expect(await new LeaseRateLimiter(store).peek('key_a', 3, now)).toEqual({ allowed: true, limit: 3, remaining: 0, resetSeconds: 10 });
      expect(await store.check([{ scope: { owner: 'key:key_a', name: 'concurrency' }, limit: 1, units: 1, expiresAt: now, reportFreesAt: true }], now)).toEqual(
        [{ held: 1, freesAt: now + 30_000 }],
      );
      const channels = new ChannelLimits(store);
      expect(await channels.usage('chn_a', now)).toEqual({ inFlight: 1, calls: 2, images: 4, coolingUntil: now + 15_000 });
      expect(await channels.acquire('chn_a', { maxConcurrency: 5, rpm: null, ipm: null, leaseMs: 1000 }, 1, now)).toEqual({
        refused: 'cooling_down',
        retryAfterMs: 15_000,
      });
      expect(await channels.takeLease('channel-probe', 'replica-b', now + 60_000, now)).toBe(false);
      await channels.endLeaseAt('channel-probe', 'replica-a', now, now);
      expect(await channels.takeLease('channel-probe', 'replica-b', now + 60_000, now)).toBe(true);

      // Down and up again: the old tables come back (empty), then merge again.
      await migrateToLatest(database.db as never, database.engine, '0017_admin_token_lineage_and_scopes');
      await sql`INSERT INTO rate_limit_hits (key_id, at) VALUES ('key_b', ${now - 1_000})`.execute(db);
      await migrateToLatest(database.db as never, database.engine);
      expect(await new LeaseRateLimiter(store).peek('key_b', 3, now)).toEqual({ allowed: true, limit: 3, remaining: 2, resetSeconds: 59 });
    } finally {
      await database.close();
      await throwaway.drop();
    }
  });
});
