import type { components } from '../../generated/gateway';
import type { ApiKeysTable } from '../db/schema';
import { toIso, toIsoOrNull } from '../shared/clock';
import { type ClientKeyPolicy, clientKeyPolicy, policyResource } from './key-policy';
import { currentPeriodStart, periodEnd } from './quota-period';

export type KeyResource = components['schemas']['Key'];
export type CreatedKeyResource = components['schemas']['CreatedKey'];
export type KeyStatus = components['schemas']['KeyStatus'];
export type ApiKeyRow = ApiKeysTable;

/** An authenticated client key, as handlers and services see it (the row's secrets left behind). */
export interface ClientKey {
  id: string;
  /** The hash of the secret the request authenticated with: the reservation checks it is still the key's. */
  keyHash: string;
  rateLimitRpm: number;
  allowedProviders: readonly string[];
  creditsQuota: number;
  quotaPeriodDays: number;
  createdAt: number;
  /** max_concurrent, allowed_ips, allowed_models, alert thresholds (key-policy.ts). */
  policy: ClientKeyPolicy;
}

export function toClientKey(row: ApiKeyRow): ClientKey {
  return {
    id: row.id,
    keyHash: row.key_hash,
    rateLimitRpm: row.rate_limit_rpm,
    allowedProviders: JSON.parse(row.allowed_providers) as string[],
    creditsQuota: row.credits_quota,
    quotaPeriodDays: row.quota_period_days,
    createdAt: row.created_at,
    policy: clientKeyPolicy(row),
  };
}

export function keyStatus(row: ApiKeyRow, now: number): KeyStatus {
  if (row.status === 'disabled') return 'disabled';
  if (row.expires_at !== null && row.expires_at <= now) return 'expired';
  return 'active';
}

/** Usage in the current period: stored usage of an older period has lapsed. */
export function creditsUsedNow(row: ApiKeyRow, now: number): { used: number; periodStart: number } {
  const periodStart = currentPeriodStart(row.created_at, row.quota_period_days, now);
  const used = row.period_started_at >= periodStart ? row.credits_used : 0;
  return { used, periodStart: Math.max(periodStart, row.period_started_at) };
}

export function toKeyResource(row: ApiKeyRow, now: number): KeyResource {
  const { used, periodStart } = creditsUsedNow(row, now);
  return {
    id: row.id,
    name: row.name,
    owner: row.owner,
    hint: row.hint,
    status: keyStatus(row, now),
    credits_quota: row.credits_quota,
    credits_used: used,
    credits_remaining: Math.max(0, row.credits_quota - used),
    quota_period_days: row.quota_period_days,
    period_started_at: toIso(periodStart),
    period_resets_at: toIso(periodEnd(periodStart, row.quota_period_days)),
    rate_limit_rpm: row.rate_limit_rpm,
    allowed_providers: JSON.parse(row.allowed_providers) as string[],
    expires_at: toIsoOrNull(row.expires_at),
    created_at: toIso(row.created_at),
    disabled_at: toIsoOrNull(row.disabled_at),
    last_used_at: toIsoOrNull(row.last_used_at),
    ...policyResource(row),
  };
}
