import { type Kysely, sql } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { Database, GenerationsTable } from '../db/schema';

/**
 * Rows of the partial index generations_active_idx. Every query of the workers and the sweeper
 * carries this term, written out rather than bound: SQLite uses a partial index only when the
 * query's WHERE repeats the index's own term with the same literals (it does not look into bound
 * parameters); without it each poll scanned every generation ever made (`SCAN generations`).
 */
export const ACTIVE_ROWS = sql<boolean>`status IN ('queued', 'running')`;

/**
 * SQL on generation rows: the row's insert, its reads and lists, the sweeper's query. Reserving is in
 * reservations.repository.ts, settling in settlement.repository.ts, attempt rows in attempts.repository.ts.
 */
type Db = Kysely<Database>;

/** Every column of a generation row, in the order the reservation statement writes them. */
export const GENERATION_COLUMNS = [
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
  'request',
  'lease_owner',
  'lease_expires_at',
  'started_at',
  'cancel_requested',
  'error_message',
  'runs',
] as const satisfies ReadonlyArray<keyof GenerationsTable>;

const insertGenerationQuery = preparedQuery<GenerationsTable & Record<string, unknown>, never>([...GENERATION_COLUMNS], (db, p) =>
  db.insertInto('generations').values(p),
);

/** One usage row per generation (prepared: every generation runs this). */
export async function insertGeneration(db: Db, row: GenerationsTable): Promise<void> {
  await insertGenerationQuery(db, row as GenerationsTable & Record<string, unknown>);
}

/** Statuses of a generation not settled yet: its credits are reserved. */
export const ACTIVE_STATUSES = ['queued', 'running'] as const;

/** The key's generations waiting for a worker (the per-key cap of the asynchronous path). */
export async function countQueuedGenerations(db: Db, keyId: string): Promise<number> {
  const row = await db
    .selectFrom('generations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('key_id', '=', keyId)
    .where('status', '=', 'queued')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function findGeneration(db: Db, id: string): Promise<GenerationsTable | undefined> {
  return db.selectFrom('generations').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Running generations whose current run started before `before` (their provider deadline plus
 * grace ago): the process running it died or lost track of it, and no worker took it over in
 * time. Queued ones wait for a worker and are never swept. Rows from before durable generations
 * have no started_at: their age counts from creation.
 */
export async function findStalePendingGenerations(db: Db, provider: string, before: number, limit: number): Promise<GenerationsTable[]> {
  return db
    .selectFrom('generations')
    .selectAll()
    .where(ACTIVE_ROWS)
    .where('status', '=', 'running')
    .where('provider', '=', provider)
    .where((eb) => eb(eb.fn.coalesce('started_at', 'created_at'), '<', before))
    .limit(limit)
    .execute();
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
  return q
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(query.limit + 1)
    .execute();
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
