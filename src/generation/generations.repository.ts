import { type Kysely, sql } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { Database, GenerationsTable } from '../db/schema';
import { releaseCredits } from '../keys/keys.repository';

type Db = Kysely<Database>;

const GENERATION_COLUMNS = [
  'id',
  'key_id',
  'client_id',
  'model',
  'provider',
  'images',
  'credits',
  'status',
  'error_code',
  'latency_ms',
  'period_started_at',
  'created_at',
  'completed_at',
  'usage_epoch',
] as const satisfies ReadonlyArray<keyof GenerationsTable>;

const insertGenerationQuery = preparedQuery<GenerationsTable & Record<string, unknown>, never>([...GENERATION_COLUMNS], (db, p) =>
  db.insertInto('generations').values(p),
);

/** All SQL on generations: one usage row per generation (prepared: every generation runs these). */
export async function insertGeneration(db: Db, row: GenerationsTable): Promise<void> {
  await insertGenerationQuery(db, row as GenerationsTable & Record<string, unknown>);
}

const completeGenerationQuery = preparedQuery<
  { id: string; status: string; errorCode: string | null; latencyMs: number | null; completedAt: number },
  never
>(['id', 'status', 'errorCode', 'latencyMs', 'completedAt'], (db, p) =>
  db
    .updateTable('generations')
    .set({ status: p.status, error_code: p.errorCode, latency_ms: p.latencyMs, completed_at: p.completedAt })
    .where('id', '=', p.id)
    .where('status', '=', 'pending'),
);

/**
 * Settles a pending generation; false when it was no longer pending (the sweeper declared it
 * abandoned and released its credits first), so the caller must not release them again.
 */
export async function completeGeneration(
  db: Db,
  id: string,
  outcome: { status: 'succeeded' | 'failed'; errorCode: string | null; latencyMs: number; completedAt: number },
): Promise<boolean> {
  const result = await completeGenerationQuery(db, { id, ...outcome });
  return Number(result.numAffectedRows ?? 0) === 1;
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

/**
 * Fails a pending generation and gives its credits back to the book they were charged to, in one
 * transaction: the request's own failure path and the sweeper both come here, and whichever marks
 * the row first releases; the other changes nothing. False when the row was no longer pending.
 */
export async function failGeneration(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  outcome: { errorCode: string; latencyMs: number | null; completedAt: number },
): Promise<boolean> {
  const failed = await completeGenerationQuery(trx, { id: generation.id, status: 'failed', ...outcome });
  if (Number(failed.numAffectedRows ?? 0) !== 1) return false;
  // Internal generations (no key) reserved nothing.
  if (generation.key_id !== null && generation.usage_epoch !== null) {
    await releaseCredits(trx, generation.key_id, generation.credits, generation.usage_epoch);
  }
  return true;
}

export interface GenerationListQuery {
  keyId?: string;
  clientId?: string;
  model?: string;
  status?: string;
  createdAfter?: number;
  createdBefore?: number;
  limit: number;
  after?: { createdAt: number; id: string };
}

/** Newest first; one row more than `limit` tells the caller a next page exists. */
export async function listGenerations(db: Db, query: GenerationListQuery): Promise<GenerationsTable[]> {
  let q = db.selectFrom('generations').selectAll();
  if (query.keyId !== undefined) q = q.where('key_id', '=', query.keyId);
  if (query.clientId !== undefined) q = q.where('client_id', '=', query.clientId);
  if (query.model !== undefined) q = q.where('model', '=', query.model);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  if (query.createdAfter !== undefined) q = q.where('created_at', '>=', query.createdAfter);
  if (query.createdBefore !== undefined) q = q.where('created_at', '<', query.createdBefore);
  const after = query.after;
  if (after) {
    q = q.where((eb) => eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('id', '<', after.id)])]));
  }
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit + 1).execute();
}

export interface UsageAggregate {
  day_start: number;
  key_id: string | null;
  client_id: string | null;
  model: string;
  generations: number;
  images: number;
  credits: number;
}

/** Succeeded generations in [from, to), summed per UTC day, key or service, and model. */
export async function aggregateUsage(db: Db, range: { from: number; to: number; keyId?: string }): Promise<UsageAggregate[]> {
  // Integer arithmetic on epoch milliseconds gives the UTC day on both engines.
  const day = sql<number>`created_at - (created_at % 86400000)`;
  let q = db
    .selectFrom('generations')
    .select((eb) => [
      day.as('day_start'),
      'key_id',
      'client_id',
      'model',
      eb.fn.countAll<number>().as('generations'),
      eb.fn.sum<number>('images').as('images'),
      eb.fn.sum<number>('credits').as('credits'),
    ])
    .where('status', '=', 'succeeded')
    .where('created_at', '>=', range.from)
    .where('created_at', '<', range.to);
  if (range.keyId !== undefined) q = q.where('key_id', '=', range.keyId);
  const rows = await q.groupBy([day, 'key_id', 'client_id', 'model']).orderBy('day_start').orderBy('key_id').orderBy('model').execute();
  // PostgreSQL answers count/sum as strings.
  return rows.map((r) => ({ ...r, day_start: Number(r.day_start), generations: Number(r.generations), images: Number(r.images), credits: Number(r.credits) }));
}
