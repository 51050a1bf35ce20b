import { keyRowColumns } from './rules/sql-value';
import { type Kysely, sql, type Updateable } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import { forUpdate } from '../db/row-lock';
import type { ApiKeysTable, Database } from '../db/schema';
import type { ApiKeyRow, KeyStatus, KeyWithProjectRow } from './key.model';
import { keyStatusIsSql, keyUsableSql } from './rules/key-usability';
import { requotaColumns, periodStartNowSql, storedPeriodEndedSql, usedNowSql } from './rules/quota-period';

/** All SQL on api_keys. Every function takes the executor, so it runs inside a transaction (`trx`) too. */
export type Db = Kysely<Database>;

/** The api_keys columns the rules (./rules) read, for their SQL forms. */
const KEY_ROW = keyRowColumns();

export async function insertKey(db: Db, row: ApiKeyRow): Promise<void> {
  await db.insertInto('api_keys').values(row).execute();
}

/** `lock`: FOR UPDATE on PostgreSQL, for read-then-write transactions. */
export async function findKeyById(db: Db, id: string, options: { lock?: boolean } = {}): Promise<ApiKeyRow | undefined> {
  const query = db.selectFrom('api_keys').selectAll().where('id', '=', id);
  return (options.lock ? forUpdate(db, query) : query).executeTakeFirst();
}

const selectKeyByHash = preparedQuery<{ keyHash: string }, KeyWithProjectRow>(['keyHash'], (db, p) =>
  db
    .selectFrom('api_keys')
    .leftJoin('projects', 'projects.id', 'api_keys.project_id')
    .selectAll('api_keys')
    .select([
      'projects.status as project_status',
      'projects.rate_limit_rpm as project_rate_limit_rpm',
      'projects.max_concurrent as project_max_concurrent',
      'projects.allowed_providers as project_allowed_providers',
      'projects.allowed_models as project_allowed_models',
      'projects.prompt_rules as project_prompt_rules',
      'projects.moderation_hook as project_moderation_hook',
      'projects.moderation_hook_secret as project_moderation_hook_secret',
      'projects.moderation_hook_previous_secret as project_moderation_hook_previous_secret',
      'projects.moderation_hook_previous_secret_expires_at as project_moderation_hook_previous_secret_expires_at',
    ])
    .where('api_keys.key_hash', '=', p.keyHash),
);

/** Every client request runs this (with the key's project, so a cached key carries it): prepared once. */
export async function findKeyByHash(db: Db, keyHash: string): Promise<KeyWithProjectRow | undefined> {
  return (await selectKeyByHash(db, { keyHash })).rows[0];
}

export interface KeyListQuery {
  status?: KeyStatus;
  owner?: string;
  /** Only the keys of this project. */
  projectId?: string;
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
  if (query.projectId !== undefined) q = q.where('project_id', '=', query.projectId);
  // `->>` reads a jsonb field on PostgreSQL and a JSON text field on SQLite.
  if (query.metadata !== undefined) q = q.where(sql<string>`metadata ->> CAST(${query.metadata.name} AS text)`, '=', query.metadata.value);
  if (query.status !== undefined) q = q.where(keyStatusIsSql(query.status, KEY_ROW, query.now));
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

export async function updateKey(db: Db, id: string, changes: Updateable<ApiKeysTable>): Promise<ApiKeyRow | undefined> {
  return db.updateTable('api_keys').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export interface Reservation {
  credits_used: number;
  credits_quota: number;
  /** The key's project as the reservation found the row (its book is reserved in the same transaction); null without one. */
  project_id?: string | null;
  /** The book the credits were charged to, and the start of the period it counts. */
  usage_epoch: number;
  period_started_at: number;
}

const reserveCreditsQuery = preparedQuery<{ id: string; keyHash: string; cost: number; now: number }, Reservation>(
  ['id', 'keyHash', 'cost', 'now'],
  (db, p) => {
    const ended = storedPeriodEndedSql(KEY_ROW, p.now);
    return db
      .updateTable('api_keys')
      .set({
        credits_used: sql`CASE WHEN ${ended} THEN ${p.cost} ELSE credits_used + ${p.cost} END`,
        period_started_at: periodStartNowSql(KEY_ROW, p.now),
        usage_epoch: sql`CASE WHEN ${ended} THEN usage_epoch + 1 ELSE usage_epoch END`,
        last_used_at: p.now,
      })
      .where('id', '=', p.id)
      .where(keyUsableSql(KEY_ROW, p.keyHash, p.now))
      .where(sql<boolean>`${usedNowSql(KEY_ROW, p.now)} + ${p.cost} <= credits_quota`)
      .returning(['credits_used', 'credits_quota', 'usage_epoch', 'period_started_at', 'project_id']);
  },
);

/**
 * Reserves `cost` credits in one atomic conditional UPDATE, so concurrent requests (or replicas)
 * can never spend past the quota. It also re-checks what the request's authentication saw (which may
 * come from a cache, key-cache.ts): the key still active, not expired at `now`, and `keyHash` (the
 * secret the request used) still its hash, so a disable, an expiry or a rotation that committed
 * since is never charged. Undefined tells the caller to read the key again to say which it was. Whether the stored period has ended, and so whether the usage
 * rolls over into a new book, is decided from the row itself in the same statement (never from a
 * key the request read earlier, which an administrator may have changed since). Returns the book
 * charged, or undefined when the credits are not there.
 */
export async function reserveCredits(db: Db, key: { id: string; keyHash: string }, cost: number, now: number): Promise<Reservation | undefined> {
  return (await reserveCreditsQuery(db, { id: key.id, keyHash: key.keyHash, cost, now })).rows[0];
}

const releaseCreditsQuery = preparedQuery<{ id: string; cost: number; epoch: number }, never>(['id', 'cost', 'epoch'], (db, p) =>
  db
    .updateTable('api_keys')
    .set({ credits_used: sql`credits_used - ${p.cost}` })
    .where('id', '=', p.id)
    .where('usage_epoch', '=', p.epoch)
    .where('credits_used', '>=', p.cost),
);

/**
 * Gives back reserved credits, but only to the book they were taken from: once that book is closed
 * (reset_usage, roll-over to a new period) the release changes nothing in the current one.
 */
export async function releaseCredits(db: Db, id: string, cost: number, epoch: number): Promise<void> {
  await releaseCreditsQuery(db, { id, cost, epoch });
}

/** Sets quota and period in one statement, deciding from the row as it is then what happens to the usage (requotaColumns). */
export async function setQuota(
  db: Db,
  id: string,
  quota: { creditsQuota: number; periodDays: number | null; resetUsage: boolean; now: number },
): Promise<ApiKeyRow | undefined> {
  return db.updateTable('api_keys').set(requotaColumns(KEY_ROW, quota)).where('id', '=', id).returningAll().executeTakeFirst();
}
