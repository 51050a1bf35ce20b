import { sql } from 'kysely';
import type { ClientKey } from '../keys/key.model';
import { keyStatus, keyStatusIsSql } from '../keys/rules/key-usability';
import { DEFAULT_ALERT_THRESHOLDS } from '../keys/key-policy';
import { thresholdsCrossed } from '../keys/rules/quota-thresholds';
import { DAY_MS, toIso } from '../shared/clock';
import { type Db, emitEvent } from './outbox';

/**
 * Key and project events. Quota events come from the reservation's transaction and are deduplicated
 * per book (a key's or a project's), threshold and period by the outbox's unique dedupe key, so
 * replicas racing across a threshold raise it exactly once.
 */

/** Whose book a quota event is about: a key (with its alert thresholds) or a project (the default ones). */
export interface QuotaBook {
  kind: 'key' | 'project';
  id: string;
  alertThresholds: readonly number[];
}

export function keyQuotaBook(key: Pick<ClientKey, 'id' | 'policy'>): QuotaBook {
  return { kind: 'key', id: key.id, alertThresholds: key.policy.alertThresholds };
}

export function projectQuotaBook(projectId: string): QuotaBook {
  return { kind: 'project', id: projectId, alertThresholds: DEFAULT_ALERT_THRESHOLDS };
}

/** The event type, the data's id field and the dedupe prefix of a book's quota events (a key's are as they always were). */
const OF_KIND = {
  key: { threshold: 'key.quota.threshold_reached', exhausted: 'key.quota.exhausted', idField: 'key_id', dedupe: '' },
  project: { threshold: 'project.quota.threshold_reached', exhausted: 'project.quota.exhausted', idField: 'project_id', dedupe: 'project-' },
} as const;

/** After a reservation took `cost` credits from `book` and its usage is now `used` of `quota` in the period starting `periodStart`. */
export async function emitQuotaEvents(
  trx: Db,
  book: QuotaBook,
  reservation: { used: number; quota: number; cost: number; periodStart: number },
  now: number,
): Promise<void> {
  const { used, quota, cost, periodStart } = reservation;
  if (quota <= 0) return;
  const kind = OF_KIND[book.kind];
  const before = used - cost;
  const data = (extra: Record<string, unknown>) => ({
    [kind.idField]: book.id,
    credits_used: used,
    credits_quota: quota,
    period_started_at: toIso(periodStart),
    ...extra,
  });
  for (const threshold of thresholdsCrossed({ before, after: used, quota }, book.alertThresholds)) {
    await emitEvent(trx, { type: kind.threshold, data: data({ threshold }), dedupeKey: `${kind.dedupe}threshold:${book.id}:${threshold}:${periodStart}` }, now);
  }
  if (used >= quota) await emitQuotaExhausted(trx, book, { used, quota, periodStart }, now);
}

/** Once per book and period: the credits ran out (reached exactly, or a request needed more than was left). */
export async function emitQuotaExhausted(
  trx: Db,
  book: Pick<QuotaBook, 'kind' | 'id'>,
  /** `used` is null when a request was refused (usage unknown to the caller). */
  state: { used: number | null; quota: number; periodStart: number },
  now: number,
): Promise<void> {
  const kind = OF_KIND[book.kind];
  await emitEvent(
    trx,
    {
      type: kind.exhausted,
      data: { [kind.idField]: book.id, credits_used: state.used, credits_quota: state.quota, period_started_at: toIso(state.periodStart) },
      dedupeKey: `${kind.dedupe}exhausted:${book.id}:${state.periodStart}`,
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
