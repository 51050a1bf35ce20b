import { ApiError } from '../errors/api-error';
import type { HookFailureMode } from '../guardrails/moderation-hook';
import type { PromptRuleSet } from '../guardrails/prompt-rules';
import { requestsPerMinute } from '../ratelimit/rate-limiter';

/**
 * A key's project as a request carries it (read with the key, cached with it, so a change of the
 * project drops its keys' entries: ProjectsService). Its quota is not here: the reservation decides
 * it on the project's row as it is then.
 */
export interface ClientProject {
  readonly id: string;
  /** 'active' | 'disabled' as stored when the key was read; the reservation checks it again. */
  readonly status: string;
  readonly rateLimitRpm: number | null;
  readonly maxConcurrent: number | null;
  readonly allowedProviders: readonly string[] | null;
  readonly allowedModels: readonly string[] | null;
  /** Its prompt rules as stored (its keys' own add to them: key-policy.ts, effectivePromptRules); null = none. */
  readonly promptRules: PromptRuleSet | null;
  /** Its moderation hook (src/guardrails/project-moderation.ts); null = none, and no work on the request path. */
  readonly moderationHook: ProjectModerationHook | null;
}

/** A project's moderation hook as stored: the settings, and the secret still sealed (opened only to sign a call). */
export interface ProjectModerationHook {
  readonly url: string;
  readonly timeoutMs: number;
  readonly failureMode: HookFailureMode;
  readonly sealedSecret: string;
  /** After a rotation, the old secret (sealed) and until when it still signs the calls; null otherwise. */
  readonly previous: { readonly sealedSecret: string; readonly expiresAt: number } | null;
}

/** projects.moderation_hook: the settings as an admin set them (the secret is its own column). */
export interface StoredModerationHook {
  url: string;
  timeout_ms: number;
  failure_mode: HookFailureMode;
}

/** The hook columns of a project row, under the names keys.repository.ts joins them as. */
export interface ModerationHookColumns {
  project_moderation_hook: string | null;
  project_moderation_hook_secret: string | null;
  project_moderation_hook_previous_secret: string | null;
  project_moderation_hook_previous_secret_expires_at: number | string | null;
}

/** The hook of a project row's columns; null without one (or, defensively, without its secret). */
export function projectModerationHookOf(columns: Partial<ModerationHookColumns>): ProjectModerationHook | null {
  const settings = columns.project_moderation_hook;
  const sealedSecret = columns.project_moderation_hook_secret;
  if (settings == null || sealedSecret == null) return null;
  const stored = JSON.parse(settings) as StoredModerationHook;
  const previousSecret = columns.project_moderation_hook_previous_secret;
  const previousExpiresAt = columns.project_moderation_hook_previous_secret_expires_at;
  const previous =
    previousSecret == null || previousExpiresAt == null ? null : Object.freeze({ sealedSecret: previousSecret, expiresAt: Number(previousExpiresAt) });
  return Object.freeze({ url: stored.url, timeoutMs: stored.timeout_ms, failureMode: stored.failure_mode, sealedSecret, previous });
}

/** The project columns read with a key (keys.repository.ts joins them under these names). */
export interface ProjectJoinColumns extends ModerationHookColumns {
  project_status: string | null;
  project_rate_limit_rpm: number | null;
  project_max_concurrent: number | null;
  project_allowed_providers: string | null;
  project_allowed_models: string | null;
  project_prompt_rules: string | null;
}

/** The project of a key row read with its project's columns; null for a key without one (or whose project row is gone). */
export function clientProjectOf(projectId: string | null | undefined, columns: Partial<ProjectJoinColumns>): ClientProject | null {
  const status = columns.project_status ?? null;
  if (projectId === null || projectId === undefined || status === null) return null;
  const list = (value: string | null) => (value === null ? null : Object.freeze(JSON.parse(value) as string[]));
  return Object.freeze({
    id: projectId,
    status,
    rateLimitRpm: columns.project_rate_limit_rpm ?? null,
    maxConcurrent: columns.project_max_concurrent ?? null,
    allowedProviders: list(columns.project_allowed_providers ?? null),
    allowedModels: list(columns.project_allowed_models ?? null),
    promptRules: columns.project_prompt_rules == null ? null : (JSON.parse(columns.project_prompt_rules) as PromptRuleSet),
    moderationHook: projectModerationHookOf(columns),
  });
}

/** 403 project_disabled. */
export function projectDisabled(projectId: string): ApiError {
  return new ApiError('project_disabled', `This key's project ${projectId} is disabled.`);
}

/** 429 project_rate_limited, with when to retry. */
export function projectRateLimited(project: ClientProject, resetSeconds: number): ApiError {
  return new ApiError(
    'project_rate_limited',
    `Rate limit of ${requestsPerMinute(project.rateLimitRpm ?? 0)} of project ${project.id} reached; retry in ${resetSeconds} s.`,
    { headers: { 'Retry-After': String(resetSeconds) } },
  );
}

/** 429 project_concurrency_limited. */
export function projectConcurrencyLimited(project: ClientProject): ApiError {
  return new ApiError(
    'project_concurrency_limited',
    `This key's project already has ${project.maxConcurrent} generations in flight (its max_concurrent); retry when one finishes.`,
    { headers: { 'Retry-After': '1' } },
  );
}
