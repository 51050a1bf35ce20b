import { type Kysely, sql } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { Database, GenerationsTable, GenerationTasksTable } from '../db/schema';
import { capabilitiesOf } from '../db/storage-capabilities';
import { ACTIVE_ROWS } from './generations.repository';

type Db = Kysely<Database>;

/** SQL of durable generations: claiming with a lease, renewing it, and the per-image task journal. */

/** Claims a queued generation by id for `owner` (the local worker running a request it just queued). */
export async function claimQueuedGeneration(db: Db, id: string, owner: string, now: number, leaseMs: number): Promise<GenerationsTable | undefined> {
  return db
    .updateTable('generations')
    .set((eb) => ({ status: 'running', lease_owner: owner, lease_expires_at: Date.now() + leaseMs, started_at: now, runs: eb('runs', '+', 1) }))
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .returningAll()
    .executeTakeFirst();
}

/**
 * Leases are wall-clock time (like the channel leases), whatever clock the business logic runs
 * on: a test clock jumping a day must not make every live lease look lapsed. `now` (business
 * clock) only stamps started_at, which the sweeper reads.
 */

/** Models of work a worker could claim now (queued, or running under a lapsed lease). */
export async function claimableModels(db: Db, limit = 50): Promise<string[]> {
  const wallNow = Date.now();
  const rows = await db
    .selectFrom('generations')
    .select('model')
    .distinct()
    .where(ACTIVE_ROWS)
    .where('request', 'is not', null)
    .where((eb) => eb.or([eb('status', '=', 'queued'), eb.and([eb('status', '=', 'running'), eb('lease_expires_at', '<', wallNow)])]))
    .limit(limit)
    .execute();
  return rows.map((r) => r.model);
}

/**
 * Claims the oldest claimable generation of one of `models`: queued, or running under a lease
 * that lapsed (its process died). With SKIP LOCKED (PostgreSQL) it passes over rows another replica
 * is claiming; SQLite has one writer, so one UPDATE with a sub-select is atomic.
 */
export async function claimNextGeneration(db: Db, owner: string, models: string[], now: number, leaseMs: number): Promise<GenerationsTable | undefined> {
  if (models.length === 0) return undefined;
  const wallNow = Date.now();
  const claimable = sql`${ACTIVE_ROWS} AND request IS NOT NULL AND model IN (${sql.join(models)})
    AND (status = 'queued' OR (status = 'running' AND lease_expires_at < ${wallNow}))`;
  // started_at is when this run started: a takeover gets its provider deadline afresh before the sweeper's age limit.
  const set = sql`status = 'running', lease_owner = ${owner}, lease_expires_at = ${wallNow + leaseMs}, started_at = ${now}, runs = runs + 1`;
  const query = capabilitiesOf(db).skipLocked
    ? sql<GenerationsTable>`UPDATE generations SET ${set} WHERE id = (
          SELECT id FROM generations WHERE ${claimable} ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *`
    : sql<GenerationsTable>`UPDATE generations SET ${set} WHERE id = (
          SELECT id FROM generations WHERE ${claimable} ORDER BY created_at, id LIMIT 1) AND ${claimable} RETURNING *`;
  const result = await query.execute(db);
  const row = result.rows[0];
  return row && normalize(row);
}

/** PostgreSQL answers bigint columns of raw queries as strings. */
function normalize(row: GenerationsTable): GenerationsTable {
  const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    ...row,
    images: Number(row.images),
    credits: Number(row.credits),
    period_started_at: Number(row.period_started_at),
    created_at: Number(row.created_at),
    completed_at: num(row.completed_at),
    usage_epoch: num(row.usage_epoch),
    lease_expires_at: num(row.lease_expires_at),
    started_at: num(row.started_at),
    latency_ms: num(row.latency_ms),
    cancel_requested: Number(row.cancel_requested),
    runs: Number(row.runs),
  };
}

/**
 * Extends `owner`'s lease; undefined when it no longer holds the generation (settled, canceled, or
 * taken over after the lease lapsed), so the holder must stop.
 */
/**
 * Renews the leases of the generations `owner` holds among `ids`, in one statement; answers the
 * ones still held (a row missing from the answer was taken over or settled elsewhere) with whether
 * a cancel was requested for it.
 */
export async function renewGenerationLeases(
  db: Db,
  ids: readonly string[],
  owner: string,
  leaseMs: number,
): Promise<Map<string, { cancelRequested: boolean }>> {
  const rows = await db
    .updateTable('generations')
    .set({ lease_expires_at: Date.now() + leaseMs })
    .where('id', 'in', ids)
    .where('lease_owner', '=', owner)
    .where('status', '=', 'running')
    .returning(['id', 'cancel_requested'])
    .execute();
  return new Map(rows.map((row) => [row.id, { cancelRequested: Number(row.cancel_requested) === 1 }]));
}

export async function listGenerationTasks(db: Db, generationId: string): Promise<GenerationTasksTable[]> {
  return db.selectFrom('generation_tasks').selectAll().where('generation_id', '=', generationId).orderBy('image_index').execute();
}

/** Written before an upstream call for the image is sent (background runs): a takeover that finds it without a task id must not send again. */
/**
 * Marks a call as about to be sent, only while `owner` still runs the generation: false when it was
 * canceled or taken over meanwhile, and the call must not be sent. With row locks (PostgreSQL) the
 * generation row is locked (FOR UPDATE), so a cancel either commits first (no mark) or sees the mark it must charge.
 */
export async function recordTaskSending(db: Db, row: GenerationTasksTable, owner: string): Promise<boolean> {
  const { rowLocks } = capabilitiesOf(db);
  const result = await db
    .insertInto('generation_tasks')
    .columns(['generation_id', 'image_index', 'channel_id', 'task_id', 'sent_at'])
    .expression((eb) => {
      const held = eb
        .selectFrom('generations')
        .select([
          'generations.id',
          sql<number>`cast(${row.image_index} as integer)`.as('image_index'),
          sql<string>`cast(${row.channel_id} as varchar(64))`.as('channel_id'),
          sql<null>`null`.as('task_id'),
          sql<number>`cast(${row.sent_at} as bigint)`.as('sent_at'),
        ])
        .where('generations.id', '=', row.generation_id)
        .where('generations.status', '=', 'running')
        .where('generations.lease_owner', '=', owner);
      return rowLocks ? held.forUpdate() : held;
    })
    .onConflict((oc) => oc.columns(['generation_id', 'image_index']).doUpdateSet({ channel_id: row.channel_id, task_id: null, sent_at: row.sent_at }))
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

/** The image indexes of a generation's marked calls (what a cancel charges: src/generation/charges.ts). */
export async function markedCallIndexes(db: Db, generationId: string): Promise<number[]> {
  const rows = await db.selectFrom('generation_tasks').select('image_index').where('generation_id', '=', generationId).execute();
  return rows.map((r) => Number(r.image_index));
}

export async function recordTaskAccepted(db: Db, row: GenerationTasksTable & { task_id: string }): Promise<void> {
  await db
    .insertInto('generation_tasks')
    .values(row)
    .onConflict((oc) => oc.columns(['generation_id', 'image_index']).doUpdateSet({ channel_id: row.channel_id, task_id: row.task_id }))
    .execute();
}

/** Journal rows of settled generations (no takeover will read them again); returns how many. */
export async function pruneSettledTasks(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('generation_tasks')
    // Driven by the (few) journal rows, each looked up by primary key: not a list of every settled generation.
    .where((eb) =>
      eb.exists(
        eb
          .selectFrom('generations')
          .select(sql`1`.as('one'))
          .whereRef('generations.id', '=', 'generation_tasks.generation_id')
          .where('generations.status', 'in', ['succeeded', 'failed', 'canceled']),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows ?? 0);
}

/**
 * A generation moving on to the next model of its chain (src/channels/model-fallbacks.ts), while
 * `owner` still runs it: the row names that model and its provider from now on (the model asked for
 * kept in requested_model), its run's clock restarts (the sweeper gives it that provider's deadline),
 * and the journal of the previous model's calls goes: they ended, and none is resumed. False when
 * `owner` no longer holds it (canceled, or taken over).
 */
export async function recordFallback(db: Db, id: string, owner: string, to: { model: string; provider: string }, now: number): Promise<boolean> {
  const moved = await db
    .updateTable('generations')
    .set((eb) => ({ requested_model: eb.fn.coalesce('requested_model', 'model'), model: to.model, provider: to.provider, started_at: now }))
    .where('id', '=', id)
    .where('status', '=', 'running')
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) !== 1) return false;
  await db.deleteFrom('generation_tasks').where('generation_id', '=', id).execute();
  return true;
}

const runStateQuery = preparedQuery<{ id: string }, Pick<GenerationsTable, 'status' | 'lease_owner' | 'cancel_requested'>>(['id'], (db, p) =>
  db.selectFrom('generations').select(['status', 'lease_owner', 'cancel_requested']).where('id', '=', p.id),
);

/**
 * Whether `owner` may still send a call of the generation: `held` while it runs it and no cancel is
 * recorded, `canceled` once a cancel committed (on any replica), `lost` when it was settled or taken
 * over otherwise. One read by primary key: what a run that does not mark its sends asks before each call.
 */
export async function runState(db: Db, id: string, owner: string): Promise<'held' | 'canceled' | 'lost'> {
  const row = (await runStateQuery(db, { id })).rows[0];
  if (row?.status === 'canceled' || Number(row?.cancel_requested ?? 0) === 1) return 'canceled';
  return row?.status === 'running' && row.lease_owner === owner ? 'held' : 'lost';
}

/** The call provably reached nothing upstream: a takeover may send it again. */
export async function forgetTask(db: Db, generationId: string, imageIndex: number): Promise<void> {
  await db.deleteFrom('generation_tasks').where('generation_id', '=', generationId).where('image_index', '=', imageIndex).execute();
}
