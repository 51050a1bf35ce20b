import type { Kysely } from 'kysely';
import type { Database, GenerationsTable } from '../db/schema';

type Db = Kysely<Database>;

/** All SQL on generations (one usage row per generation request that reserved credits). */
export async function insertGeneration(db: Db, row: GenerationsTable): Promise<void> {
  await db.insertInto('generations').values(row).execute();
}

export async function completeGeneration(
  db: Db,
  id: string,
  outcome: { status: 'succeeded' | 'failed'; errorCode: string | null; latencyMs: number; completedAt: number },
): Promise<void> {
  await db
    .updateTable('generations')
    .set({ status: outcome.status, error_code: outcome.errorCode, latency_ms: outcome.latencyMs, completed_at: outcome.completedAt })
    .where('id', '=', id)
    .execute();
}

export async function findGeneration(db: Db, id: string): Promise<GenerationsTable | undefined> {
  return db.selectFrom('generations').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Pending generations older than `before`: their process died or lost track of them. */
export async function findStalePendingGenerations(db: Db, provider: string, before: number, limit: number): Promise<GenerationsTable[]> {
  return db
    .selectFrom('generations')
    .selectAll()
    .where('status', '=', 'pending')
    .where('provider', '=', provider)
    .where('created_at', '<', before)
    .limit(limit)
    .execute();
}

/** Marks a pending generation failed; false when someone else completed it first. */
export async function failPendingGeneration(db: Db, id: string, errorCode: string, completedAt: number): Promise<boolean> {
  const result = await db
    .updateTable('generations')
    .set({ status: 'failed', error_code: errorCode, completed_at: completedAt })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
