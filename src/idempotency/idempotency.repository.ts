import type { Kysely } from 'kysely';
import type { Database, IdempotencyKeysTable } from '../db/schema';

type Db = Kysely<Database>;
export type IdempotencyRecord = IdempotencyKeysTable;

/** A request's claim on a key: who holds it and until when, unless renewed. */
export type IdempotencyClaim = Pick<IdempotencyRecord, 'scope' | 'idempotency_key' | 'request_hash' | 'created_at' | 'lease_owner' | 'lease_expires_at'>;

/** Claims the key for a new request; false when a record for (scope, key) already exists. */
export async function claimIdempotencyKey(db: Db, claim: IdempotencyClaim): Promise<boolean> {
  const result = await db
    .insertInto('idempotency_keys')
    .values({ ...claim, state: 'running', response_status: null, response_body: null, response_location: null })
    .onConflict((oc) => oc.columns(['scope', 'idempotency_key']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

/**
 * Takes over a claim of the same request whose lease lapsed at `claim.created_at` (its holder died or
 * stopped renewing): one conditional UPDATE, so of several retries racing for it one wins.
 */
export async function takeOverIdempotencyClaim(db: Db, claim: IdempotencyClaim): Promise<boolean> {
  const result = await db
    .updateTable('idempotency_keys')
    .set({ lease_owner: claim.lease_owner, lease_expires_at: claim.lease_expires_at, created_at: claim.created_at })
    .where('scope', '=', claim.scope)
    .where('idempotency_key', '=', claim.idempotency_key)
    .where('request_hash', '=', claim.request_hash)
    .where('state', '=', 'running')
    .where('lease_expires_at', '<=', claim.created_at)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Extends the leases of the running claims `owners` hold (one statement for a batch). */
export async function renewIdempotencyClaims(db: Db, owners: string[], leaseExpiresAt: number): Promise<void> {
  if (owners.length === 0) return;
  await db
    .updateTable('idempotency_keys')
    .set({ lease_expires_at: leaseExpiresAt })
    .where('lease_owner', 'in', owners)
    .where('state', '=', 'running')
    .execute();
}

export async function findIdempotencyRecord(db: Db, scope: string, key: string): Promise<IdempotencyRecord | undefined> {
  return db.selectFrom('idempotency_keys').selectAll().where('scope', '=', scope).where('idempotency_key', '=', key).executeTakeFirst();
}

/** Stores the response of the request holding the claim; false when the claim is no longer its own (taken over). */
export async function completeIdempotencyRecord(
  db: Db,
  scope: string,
  key: string,
  owner: string,
  response: { status: number; body: string; location: string | null },
): Promise<boolean> {
  const result = await db
    .updateTable('idempotency_keys')
    .set({ state: 'done', response_status: response.status, response_body: response.body, response_location: response.location, lease_owner: null })
    .where('scope', '=', scope)
    .where('idempotency_key', '=', key)
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Removes a record: the claim of `owner` only, when given (a taken-over claim is the new holder's). */
export async function deleteIdempotencyRecord(db: Db, scope: string, key: string, owner?: string): Promise<void> {
  let query = db.deleteFrom('idempotency_keys').where('scope', '=', scope).where('idempotency_key', '=', key);
  if (owner !== undefined) query = query.where('lease_owner', '=', owner);
  await query.execute();
}

/** Drops records older than `before`, and 'running' ones whose lease lapsed before `leaseLapsedBefore` (nobody renews them). */
export async function pruneIdempotencyRecords(db: Db, before: number, leaseLapsedBefore: number): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where((eb) => eb.or([eb('created_at', '<', before), eb.and([eb('state', '=', 'running'), eb('lease_expires_at', '<', leaseLapsedBefore)])]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
