import { sql } from 'kysely';
import type { ClientKey } from '../keys/key.model';
import { keyStatus, keyStatusIsSql } from '../keys/rules/key-usability';
import { thresholdsCrossed } from '../keys/rules/quota-thresholds';
import { DAY_MS, toIso } from '../shared/clock';
import { type Db, emitEvent } from './outbox';

/**
 * Key events. Quota events come from the reservation's transaction and are deduplicated per key,
 * threshold and period by the outbox's unique dedupe key, so replicas racing across a threshold
 * raise it exactly once.
 */

/** After a reservation took `cost` credits and usage is now `used` of `quota` in the period starting `periodStart`. */
export async function emitQuotaEvents(
  trx: Db,
  key: Pick<ClientKey, 'id' | 'policy'>,
  reservation: { used: number; quota: number; cost: number; periodStart: number },
  now: number,
): Promise<void> {
  const { used, quota, cost, periodStart } = reservation;
  if (quota <= 0) return;
  const before = used - cost;
  const data = (extra: Record<string, unknown>) => ({
    key_id: key.id,
    credits_used: used,
    credits_quota: quota,
    period_started_at: toIso(periodStart),
    ...extra,
  });
  for (const threshold of thresholdsCrossed({ before, after: used, quota }, key.policy.alertThresholds)) {
    await emitEvent(trx, { type: 'key.quota.threshold_reached', data: data({ threshold }), dedupeKey: `threshold:${key.id}:${threshold}:${periodStart}` }, now);
  }
  if (used >= quota) await emitQuotaExhausted(trx, key, { used, quota, periodStart }, now);
}

/** Once per key and period: the credits ran out (reached exactly, or a request needed more than was left). */
export async function emitQuotaExhausted(
  trx: Db,
  key: Pick<ClientKey, 'id'>,
  /** `used` is null when a request was refused (usage unknown to the caller). */
  state: { used: number | null; quota: number; periodStart: number },
  now: number,
): Promise<void> {
  await emitEvent(
    trx,
    {
      type: 'key.quota.exhausted',
      data: { key_id: key.id, credits_used: state.used, credits_quota: state.quota, period_started_at: toIso(state.periodStart) },
      dedupeKey: `exhausted:${key.id}:${state.periodStart}`,
    },
    now,
  );
}

export async function emitKeyDisabled(trx: Db, keyId: string, now: number): Promise<void> {
  await emitEvent(trx, { type: 'key.disabled', data: { key_id: keyId, disabled_at: toIso(now) } }, now);
}

/** The key row's columns for keyStatusIsSql(), qualified: they are read inside a subquery on events. */
const EXPIRY_COLUMNS = { status: sql.ref<string>('api_keys.status'), expiresAt: sql.ref<number | null>('api_keys.expires_at') };

/**
 * Time-driven key events, run by the dispatcher on every replica: `key.expiring` once per key and
 * expiry date when it is less than `expiringDays` away, `key.expired` once when it passes (keys
 * that expired more than a week before are left alone, so turning this on does not flood).
 */
export async function emitExpiryEvents(db: Db, expiringDays: number, now: number): Promise<number> {
  let emitted = 0;
  const candidates = await db
    .selectFrom('api_keys')
    .select(['id', 'status', 'expires_at'])
    .where('status', '=', 'active')
    .where('expires_at', 'is not', null)
    .where('expires_at', '>', now - 7 * DAY_MS)
    .where('expires_at', '<=', now + expiringDays * DAY_MS)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('events')
            .select('events.id')
            .where(
              'events.dedupe_key',
              '=',
              sql<string>`${sql.lit('expiry:')} || api_keys.id || ${sql.lit(':')} || CAST(api_keys.expires_at AS varchar(20)) || ${sql.lit(':')} || (CASE WHEN ${keyStatusIsSql('expired', EXPIRY_COLUMNS, now)} THEN 'expired' ELSE 'expiring' END)`,
            ),
        ),
      ),
    )
    .limit(500)
    .execute();
  for (const key of candidates) {
    const expiresAt = key.expires_at as number;
    const expired = keyStatus(key, now) === 'expired';
    const type = expired ? 'key.expired' : 'key.expiring';
    const id = await db
      .transaction()
      .execute((trx) =>
        emitEvent(
          trx,
          { type, data: { key_id: key.id, expires_at: toIso(expiresAt) }, dedupeKey: `expiry:${key.id}:${expiresAt}:${expired ? 'expired' : 'expiring'}` },
          now,
        ),
      );
    if (id) emitted++;
  }
  return emitted;
}
