import type { components } from '../../generated/gateway';
import type { ProjectsTable } from '../db/schema';
import { periodEnd, usageNow } from '../keys/rules/quota-period';
import { toIso, toIsoOrNull } from '../shared/clock';
import type { StoredModerationHook } from './project-policy';

export type ProjectResource = components['schemas']['Project'];
export type ProjectStatus = components['schemas']['ProjectStatus'];
export type ProjectRow = ProjectsTable;

function parseList(value: string | null): string[] | null {
  return value === null ? null : (JSON.parse(value) as string[]);
}

/** A project's usage in the current period: the key's period rule (src/keys/rules/quota-period.ts), on the project's row. */
export function projectUsageNow(row: ProjectRow, now: number): { used: number; periodStart: number } {
  return usageNow({ createdAt: row.created_at, periodDays: row.quota_period_days, periodStartedAt: row.period_started_at, creditsUsed: row.credits_used }, now);
}

/** When a rotation's old hook secret stops signing, while it still does; null otherwise. */
export function overlapEndOf(row: ProjectRow, now: number): number | null {
  const end = row.moderation_hook_previous_secret_expires_at ?? null;
  return end !== null && Number(end) > now ? Number(end) : null;
}

export function toProjectResource(row: ProjectRow, now: number): ProjectResource {
  const { used, periodStart } = projectUsageNow(row, now);
  return {
    id: row.id,
    name: row.name,
    owner: row.owner,
    status: row.status === 'disabled' ? 'disabled' : 'active',
    credits_quota: row.credits_quota,
    credits_used: used,
    credits_remaining: Math.max(0, row.credits_quota - used),
    quota_period_days: row.quota_period_days,
    period_started_at: toIso(periodStart),
    period_resets_at: toIso(periodEnd(periodStart, row.quota_period_days)),
    rate_limit_rpm: row.rate_limit_rpm,
    max_concurrent: row.max_concurrent,
    allowed_providers: parseList(row.allowed_providers),
    allowed_models: parseList(row.allowed_models),
    prompt_rules: row.prompt_rules === null ? null : (JSON.parse(row.prompt_rules) as ProjectResource['prompt_rules']),
    prompt_retention: (row.prompt_retention ?? null) as ProjectResource['prompt_retention'],
    // The settings only: the secret is shown once, by the request that made it (projects.service.ts).
    moderation_hook:
      row.moderation_hook == null
        ? null
        : { ...(JSON.parse(row.moderation_hook) as StoredModerationHook), previous_secret_expires_at: toIsoOrNull(overlapEndOf(row, now)) },
    // PostgreSQL (jsonb) answers an object, SQLite (text) a string.
    metadata: typeof row.metadata === 'string' ? (JSON.parse(row.metadata) as Record<string, string>) : row.metadata,
    created_at: toIso(row.created_at),
    disabled_at: toIsoOrNull(row.disabled_at),
  };
}
