import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema';

/** Rows deleted per statement, and statements per sweep: a sweep stays short; a backlog goes over several sweeps. */
const BATCH = 1000;
const BATCHES_PER_SWEEP = 20;

/**
 * GENERATION_RETENTION_DAYS: settled generation rows (and their attempt rows) created before the
 * cutoff are deleted. Usage analytics read the rollups (src/usage), which are kept; the books
 * (api_keys) never depend on old rows. Active rows (queued, running) are never deleted, whatever
 * their age. Answers how many generation rows went.
 */
export async function pruneOldGenerations(db: Kysely<Database>, createdBefore: number): Promise<number> {
  let deleted = 0;
  for (let batch = 0; batch < BATCHES_PER_SWEEP; batch += 1) {
    const ids = (
      await db
        .selectFrom('generations')
        .select('id')
        .where('created_at', '<', createdBefore)
        .where(sql<boolean>`status NOT IN ('queued', 'running')`)
        .orderBy('created_at')
        .limit(BATCH)
        .execute()
    ).map((row) => row.id);
    if (ids.length === 0) break;
    await db.transaction().execute(async (trx) => {
      await trx.deleteFrom('generation_attempts').where('generation_id', 'in', ids).execute();
      await trx
        .deleteFrom('generations')
        .where('id', 'in', ids)
        .where(sql<boolean>`status NOT IN ('queued', 'running')`)
        .execute();
    });
    deleted += ids.length;
    if (ids.length < BATCH) break;
  }
  return deleted;
}
