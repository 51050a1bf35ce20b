import { type Kysely, sql } from 'kysely';
import type { DatabaseEngine } from '../db/database';
import type { Database } from '../db/schema';
import { type RateLimitDecision, type RateLimiter, WINDOW_MS, decisionFromWindow, freesNextIndex } from './rate-limiter';

/**
 * Sliding-window log in the database (table rate_limit_hits), for replicas without Redis.
 * Exact across processes: on PostgreSQL a per-key advisory lock serialises check-and-insert;
 * on SQLite the check-and-insert is one statement, and a write statement holds the write lock
 * from its start. Slower than Redis: one transaction per request.
 */
export class SqlRateLimiter implements RateLimiter {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly engine: DatabaseEngine,
  ) {}

  async consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    const since = now - WINDOW_MS;
    return this.db.transaction().execute(async (trx) => {
      if (this.engine === 'postgres') await sql`SELECT pg_advisory_xact_lock(hashtext(${keyId}))`.execute(trx);
      await trx.deleteFrom('rate_limit_hits').where('key_id', '=', keyId).where('at', '<=', since).execute();
      const inserted = await sql`
        INSERT INTO rate_limit_hits (key_id, at)
        SELECT CAST(${keyId} AS varchar(64)), CAST(${now} AS bigint)
        WHERE (SELECT count(*) FROM rate_limit_hits WHERE key_id = ${keyId} AND at > ${since}) < ${limit}`.execute(trx);
      return this.decide(trx, keyId, limit, now, Number(inserted.numAffectedRows ?? 0) === 1);
    });
  }

  peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.decide(this.db, keyId, limit, now, true);
  }

  private async decide(db: Kysely<Database>, keyId: string, limit: number, now: number, allowed: boolean): Promise<RateLimitDecision> {
    const inWindow = db.selectFrom('rate_limit_hits').where('key_id', '=', keyId).where('at', '>', now - WINDOW_MS);
    const { n } = await inWindow.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    const count = Number(n);
    const frees = count === 0 ? undefined : await inWindow.select('at').orderBy('at', 'asc').offset(freesNextIndex(limit, count)).limit(1).executeTakeFirst();
    return decisionFromWindow(limit, count, frees === undefined ? undefined : Number(frees.at), now, allowed);
  }

  async close(): Promise<void> {}
}
