import type { Kysely } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { Database, GenerationAttemptsTable } from '../db/schema';

/** SQL on generation_attempts: one row per channel call; the generation runner writes them, once, when it settles. */
type Db = Kysely<Database>;

export const ATTEMPT_COLUMNS = [
  'generation_id',
  'seq',
  'image_index',
  'channel_id',
  'outcome',
  'error_code',
  'latency_ms',
  'started_at',
  'model',
  'upstream_usage',
] as const satisfies ReadonlyArray<keyof GenerationAttemptsTable>;

const insertAttemptQuery = preparedQuery<GenerationAttemptsTable & Record<string, unknown>, never>([...ATTEMPT_COLUMNS], (db, p) =>
  db
    .insertInto('generation_attempts')
    .values(p)
    .onConflict((oc) => oc.columns(['generation_id', 'seq']).doNothing()),
);

/**
 * Rows already there (a run taken over after its process died numbers its attempts from 0 again)
 * are kept: attempts are written with the settlement, which they must never make fail.
 */
export async function insertAttempts(db: Db, rows: GenerationAttemptsTable[]): Promise<void> {
  // Most generations make one attempt: that statement is prepared (every generation writes it).
  if (rows.length === 1) {
    await insertAttemptQuery(db, { ...(rows[0] as GenerationAttemptsTable), model: rows[0]?.model ?? null, upstream_usage: rows[0]?.upstream_usage ?? null });
  } else if (rows.length > 1) {
    await db
      .insertInto('generation_attempts')
      .values(rows)
      .onConflict((oc) => oc.columns(['generation_id', 'seq']).doNothing())
      .execute();
  }
}

/** The seq a takeover numbers its attempts from: after every row an earlier run of the generation wrote. */
export async function nextAttemptSeq(db: Db, generationId: string): Promise<number> {
  const row = await db
    .selectFrom('generation_attempts')
    .select((eb) => eb.fn.max('seq').as('last'))
    .where('generation_id', '=', generationId)
    .executeTakeFirst();
  return row?.last === null || row?.last === undefined ? 0 : Number(row.last) + 1;
}

export async function listAttempts(db: Db, generationId: string): Promise<GenerationAttemptsTable[]> {
  return db.selectFrom('generation_attempts').selectAll().where('generation_id', '=', generationId).orderBy('seq').execute();
}
