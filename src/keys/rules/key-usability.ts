import { type RawBuilder, sql } from 'kysely';
import type { components } from '../../../generated/gateway';
import type { SqlValue } from './sql-value';

/**
 * When a key may be used: stored `active` (an administrator can disable it), not expired at `now`,
 * and, for a request authenticated with a secret, that secret still its own (a rotation replaces it).
 * TypeScript and SQL side by side; test/keys/rules.property.test.ts checks they agree.
 */

export type KeyStatus = components['schemas']['KeyStatus'];
/** Why a key may not be used: its status, or (for a request's secret) a rotation since. */
export type KeyRefusal = Exclude<KeyStatus, 'active'> | 'rotated';

/** The key row's columns the rule reads. */
export interface KeyState {
  /** 'active' | 'disabled' as stored; "expired" is derived from expires_at. */
  status: string;
  expires_at: number | null;
  key_hash: string;
}

export function keyStatus(row: Pick<KeyState, 'status' | 'expires_at'>, now: number): KeyStatus {
  if (row.status === 'disabled') return 'disabled';
  if (row.expires_at !== null && row.expires_at <= now) return 'expired';
  return 'active';
}

/** Why a request with the secret hashing to `keyHash` may not use the key at `now`, or undefined when it may. */
export function keyRefusal(row: KeyState, keyHash: string, now: number): KeyRefusal | undefined {
  if (row.key_hash !== keyHash) return 'rotated';
  const status = keyStatus(row, now);
  return status === 'active' ? undefined : status;
}

/** The key row's columns, in SQL. */
export interface KeyStateSql {
  status: SqlValue<string>;
  expiresAt: SqlValue<number | null>;
  keyHash: SqlValue<string>;
}

/** keyStatus(row, now) = `status` in SQL, a condition on the row. */
export function keyStatusIsSql(status: KeyStatus, row: Omit<KeyStateSql, 'keyHash'>, now: SqlValue<number>): RawBuilder<boolean> {
  if (status === 'disabled') return sql<boolean>`(${row.status} = 'disabled')`;
  if (status === 'expired') return sql<boolean>`(${row.status} = 'active' AND ${row.expiresAt} <= ${now})`;
  return sql<boolean>`(${row.status} = 'active' AND (${row.expiresAt} IS NULL OR ${row.expiresAt} > ${now}))`;
}

/** keyRefusal(row, keyHash, now) === undefined in SQL: a condition on the row. */
export function keyUsableSql(row: KeyStateSql, keyHash: SqlValue<string>, now: SqlValue<number>): RawBuilder<boolean> {
  return sql<boolean>`(${row.keyHash} = ${keyHash} AND ${keyStatusIsSql('active', row, now)})`;
}
