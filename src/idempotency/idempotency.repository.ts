import type { Kysely } from 'kysely';
import type { Database, IdempotencyKeysTable } from '../db/schema';

type Db = Kysely<Database>;
export type IdempotencyRecord = IdempotencyKeysTable;

/** Claims the key for a new request; false when a record for (scope, key) already exists. */
export async function claimIdempotencyKey(
  db: Db,
  record: Pick<IdempotencyRecord, 'scope' | 'idempotency_key' | 'request_hash' | 'created_at'>,
): Promise<boolean> {
  const result = await db
    .insertInto('idempotency_keys')
    .values({ ...record, state: 'running', response_status: null, response_body: null, response_location: null })
    .onConflict((oc) => oc.columns(['scope', 'idempotency_key']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function findIdempotencyRecord(db: Db, scope: string, key: string): Promise<IdempotencyRecord | undefined> {
  return db.selectFrom('idempotency_keys').selectAll().where('scope', '=', scope).where('idempotency_key', '=', key).executeTakeFirst();
}

export async function completeIdempotencyRecord(
  db: Db,
  scope: string,
  key: string,
  response: { status: number; body: string; location: string | null },
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ state: 'done', response_status: response.status, response_body: response.body, response_location: response.location })
    .where('scope', '=', scope)
    .where('idempotency_key', '=', key)
    .execute();
}

export async function deleteIdempotencyRecord(db: Db, scope: string, key: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('scope', '=', scope).where('idempotency_key', '=', key).execute();
}

/** Drops records older than `before`, and 'running' ones older than `runningBefore` (their process died). */
export async function pruneIdempotencyRecords(db: Db, before: number, runningBefore: number): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where((eb) => eb.or([eb('created_at', '<', before), eb.and([eb('state', '=', 'running'), eb('created_at', '<', runningBefore)])]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
