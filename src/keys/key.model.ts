import type { components } from '../../generated/gateway';
import type { ApiKeysTable } from '../db/schema';
import { type ClientProject, clientProjectOf, type ProjectJoinColumns } from '../projects/project-policy';
import { toIso, toIsoOrNull } from '../shared/clock';
import { type ClientKeyPolicy, clientKeyPolicy, policyResource } from './key-policy';
import { keyStatus } from './rules/key-usability';
import { periodEnd, usageNow } from './rules/quota-period';

export type KeyResource = components['schemas']['Key'];
export type CreatedKeyResource = components['schemas']['CreatedKey'];
export type { KeyStatus } from './rules/key-usability';
export type ApiKeyRow = ApiKeysTable;
/** A key row as the client-key guard reads it: with its project's columns (null without a project). */
export type KeyWithProjectRow = ApiKeyRow & Partial<ProjectJoinColumns>;

/**
 * An authenticated client key, as handlers and services see it (the row's secrets left behind).
 * Read-only: one found in the key cache is shared by every request that authenticates with it.
 */
export interface ClientKey {
  readonly id: string;
  /** The hash of the secret the request authenticated with: the reservation checks it is still the key's. */
  readonly keyHash: string;
  readonly rateLimitRpm: number;
  readonly allowedProviders: readonly string[];
  readonly creditsQuota: number;
  readonly quotaPeriodDays: number;
  readonly createdAt: number;
  /** max_concurrent, allowed_ips, allowed_models, alert thresholds (key-policy.ts). */
  readonly policy: ClientKeyPolicy;
  /** The key's project as read with the key (src/projects/project-policy.ts), or null. */
  readonly project: ClientProject | null;
}

/**
 * A key as the client-key guard finds it by its secret's hash: the columns its status derives from
 * (rules/key-usability.ts) and the client key a request carries, made once per read of the row, so a
 * cached one costs a request no parsing.
 */
export interface FoundKey {
  readonly status: string;
  readonly expires_at: number | null;
  readonly client: ClientKey;
}

/** Frozen, arrays included: a cached one is shared by concurrent requests, so a change would leak into the others. */
export function foundKeyOf(row: KeyWithProjectRow): FoundKey {
  const client = toClientKey(row);
  const { policy } = client;
  for (const list of [client.allowedProviders, policy.allowedIps, policy.allowedModels, policy.alertThresholds]) if (list) Object.freeze(list);
  Object.freeze(policy);
  return Object.freeze({ status: row.status, expires_at: row.expires_at, client: Object.freeze(client) });
}

export function toClientKey(row: KeyWithProjectRow): ClientKey {
  const project = clientProjectOf(row.project_id, row);
  return {
    id: row.id,
    keyHash: row.key_hash,
    rateLimitRpm: row.rate_limit_rpm,
    allowedProviders: JSON.parse(row.allowed_providers) as string[],
    creditsQuota: row.credits_quota,
    quotaPeriodDays: row.quota_period_days,
    createdAt: row.created_at,
    policy: clientKeyPolicy(row, project?.promptRules ?? null),
    project,
  };
}

/** Usage in the current period: stored usage of an older period has lapsed. */
export function creditsUsedNow(row: ApiKeyRow, now: number): { used: number; periodStart: number } {
  return usageNow({ createdAt: row.created_at, periodDays: row.quota_period_days, periodStartedAt: row.period_started_at, creditsUsed: row.credits_used }, now);
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
    project_id: row.project_id ?? null,
  };
}
