import { type Kysely, type Updateable, sql } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { ApiKeysTable, Database } from '../db/schema';
import type { ApiKeyRow, KeyStatus } from './key.model';

/** All SQL on api_keys. Every function takes the executor, so it runs inside a transaction (`trx`) too. */
export type Db = Kysely<Database>;

export async function insertKey(db: Db, row: ApiKeyRow): Promise<void> {
  await db.insertInto('api_keys').values(row).execute();
}

export async function findKeyById(db: Db, id: string): Promise<ApiKeyRow | undefined> {
  return db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
}

const selectKeyByHash = preparedQuery<{ keyHash: string }, ApiKeyRow>(['keyHash'], (db, p) =>
  db.selectFrom('api_keys').selectAll().where('key_hash', '=', p.keyHash),
);

/** Every client request runs this: prepared once. */
export async function findKeyByHash(db: Db, keyHash: string): Promise<ApiKeyRow | undefined> {
  return (await selectKeyByHash(db, { keyHash })).rows[0];
}

export interface KeyListQuery {
  status?: KeyStatus;
  owner?: string;
  /** One metadata entry the key must have (exact name and value). */
  metadata?: { name: string; value: string };
  limit: number;
  /** Position after which to continue (newest first). */
  after?: { createdAt: number; id: string };
  now: number;
}

/** Newest first; asks for one row more than `limit` so the caller knows whether a next page exists. */
export async function listKeys(db: Db, query: KeyListQuery): Promise<ApiKeyRow[]> {
  let q = db.selectFrom('api_keys').selectAll();
  if (query.owner !== undefined) q = q.where('owner', '=', query.owner);
  // `->>` reads a jsonb field on PostgreSQL and a JSON text field on SQLite.
  if (query.metadata !== undefined) q = q.where(sql<string>`metadata ->> CAST(${query.metadata.name} AS text)`, '=', query.metadata.value);
  if (query.status === 'disabled') q = q.where('status', '=', 'disabled');
  if (query.status === 'active') {
    q = q.where('status', '=', 'active').where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', query.now)]));
  }
  if (query.status === 'expired') q = q.where('status', '=', 'active').where('expires_at', '<=', query.now);
  const after = query.after;
  if (after) {
    q = q.where((eb) =>
      eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('id', '<', after.id)])]),
    );
  }
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit + 1).execute();
}

export async function updateKey(db: Db, id: string, changes: Updateable<ApiKeysTable>): Promise<ApiKeyRow | undefined> {
  return db.updateTable('api_keys').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

const reserveCreditsQuery = preparedQuery<
  { id: string; cost: number; periodStart: number; now: number },
  { credits_used: number; credits_quota: number }
>(['id', 'cost', 'periodStart', 'now'], (db, p) =>
  db
    .updateTable('api_keys')
    .set((eb) => ({
      credits_used: eb.case().when('period_started_at', '<', p.periodStart).then(p.cost).else(eb('credits_used', '+', p.cost)).end(),
      period_started_at: eb.case().when('period_started_at', '<', p.periodStart).then(p.periodStart).else(eb.ref('period_started_at')).end(),
      last_used_at: p.now,
    }))
    .where('id', '=', p.id)
    .where((eb) =>
      eb(
        eb(eb.case().when('period_started_at', '<', p.periodStart).then(0).else(eb.ref('credits_used')).end(), '+', p.cost),
        '<=',
        eb.ref('credits_quota'),
      ),
    )
    .returning(['credits_used', 'credits_quota']),
);

/**
 * Reserves `cost` credits in one atomic conditional UPDATE, so concurrent requests (or replicas)
 * can never spend past the quota. When the stored usage belongs to an older period, the period
 * rolls over in the same statement. Returns undefined when the credits are not there.
 */
export async function reserveCredits(
  db: Db,
  id: string,
  cost: number,
  periodStart: number,
  now: number,
): Promise<{ credits_used: number; credits_quota: number } | undefined> {
  return (await reserveCreditsQuery(db, { id, cost, periodStart, now })).rows[0];
}

/** Gives back reserved credits, but only to the period they were taken from. */
export async function releaseCredits(db: Db, id: string, cost: number, periodStart: number): Promise<void> {
  await db
    .updateTable('api_keys')
    .set((eb) => ({ credits_used: eb('credits_used', '-', cost) }))
    .where('id', '=', id)
    .where('period_started_at', '=', periodStart)
    .where('credits_used', '>=', cost)
    .execute();
}

/**
 * Sets quota and period in one statement, carrying usage over in SQL (not read-modify-write),
 * so a reservation running at the same moment is never lost. Usage of a period that started
 * before `lapsedBefore` has lapsed and counts as zero.
 */
export async function setQuota(
  db: Db,
  id: string,
  quota: { creditsQuota: number; periodDays: number; periodStart: number; lapsedBefore: number; resetUsage: boolean; now: number },
): Promise<ApiKeyRow | undefined> {
  return db
    .updateTable('api_keys')
    .set((eb) => ({
      credits_quota: quota.creditsQuota,
      quota_period_days: quota.periodDays,
      period_started_at: quota.periodStart,
      credits_used: quota.resetUsage
        ? 0
        : eb.case().when('period_started_at', '<', quota.lapsedBefore).then(0).else(eb.ref('credits_used')).end(),
      updated_at: quota.now,
    }))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}
