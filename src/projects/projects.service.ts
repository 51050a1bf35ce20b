import type { components } from '../../generated/gateway';
import { type AdminScope, insufficientScope } from '../admin-tokens/admin-token.model';
import { type AuditContext, REDACTED, updateChange, withAuditEvent } from '../audit/audit-log';
import type { CatalogModel } from '../config/catalog';
import { ApiError } from '../errors/api-error';
import { unknownModelMessage } from '../errors/unknown-model';
import { moderationHookUrlProblem } from '../guardrails/moderation-hook';
import { storedPromptRules } from '../keys/key-policy';
import type { KeysService } from '../keys/keys.service';
import type { Clock } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { newId } from '../shared/ids';
import type { WebhookSecrets } from '../webhooks/secret-sealing';
import { generateWebhookSecret } from '../webhooks/signing';
import { withholdPendingCompletions } from '../maintenance/prompt-retention';
import type { StoredModerationHook } from './project-policy';
import { overlapEndOf, type ProjectResource, type ProjectRow, type ProjectStatus, toProjectResource } from './project.model';
import { toIsoOrNull } from '../shared/clock';
import * as projects from './projects.repository';
import { requestedQuota } from '../keys/rules/quota-period';

type Schemas = components['schemas'];
export type CreateProjectInput = Schemas['CreateProjectRequest'];
export type UpdateProjectInput = Schemas['UpdateProjectRequest'];
export type SetProjectQuotaInput = Schemas['SetQuotaRequest'];
export type ProjectList = Schemas['ProjectList'];
export type KeyList = Schemas['KeyList'];
type HookChange = NonNullable<Schemas['ModerationHookChange']>;

/** The hook's deadline when the request names none. */
export const DEFAULT_HOOK_TIMEOUT_MS = 2000;

/** How projects' moderation hooks are set: their secrets sealed as webhooks' are, their URLs checked as webhooks' are. */
export interface ModerationHookSetup {
  secrets: Pick<WebhookSecrets, 'sealForProjectHook'>;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: the same address guard as webhook deliveries. */
  allowPrivateNetworks: boolean;
}

/**
 * The scope a hook's address needs besides `projects:write`: the endpoint a hook points at is sent
 * every prompt of the project's keys, so pointing it somewhere reads prompts, which otherwise takes
 * `generations:read` (docs/operators/security.md).
 */
export const HOOK_URL_SCOPE: AdminScope = 'generations:read';

/**
 * Refuses (403 `insufficient_scope`) a request that sets a hook's URL or changes it, from an admin
 * whose scopes lack HOOK_URL_SCOPE. Removing the hook, or changing its deadline or failure mode at the
 * same URL, sends prompts nowhere new and needs `projects:write` alone.
 */
function checkHookScope(scopes: readonly AdminScope[], hook: StoredModerationHook | null | undefined, current: StoredModerationHook | undefined): void {
  if (hook == null || scopes.includes(HOOK_URL_SCOPE)) return;
  if (current?.url !== hook.url) throw insufficientScope(HOOK_URL_SCOPE, 'use');
}

export function projectNotFound(id: string): ApiError {
  return new ApiError('project_not_found', `No project with id ${id}.`, { param: 'id' });
}

/**
 * Projects: the logic behind the /admin/projects routes. Every change runs in a transaction with its
 * audit event; once committed, every key of the project is dropped from the key caches of every
 * replica (`onKeysChanged`), so a disable or a narrowing holds from the next request on.
 */
export class ProjectsService {
  constructor(
    private readonly db: projects.Db,
    private readonly clock: Clock,
    private readonly knownProviders: ReadonlySet<string>,
    private readonly cursors: CursorCodec,
    private readonly catalog: ReadonlyMap<string, CatalogModel>,
    private readonly keys: Pick<KeysService, 'listKeys'>,
    private readonly hooks: ModerationHookSetup,
    /** Told of the keys of every committed change of a project (the key cache of every replica drops them). */
    private readonly onKeysChanged: (keyIds: readonly string[]) => Promise<void> = async () => undefined,
  ) {}

  private checkLists(input: { allowed_providers?: string[] | null; allowed_models?: string[] | null }): void {
    const unknownProviders = (input.allowed_providers ?? []).filter((provider) => !this.knownProviders.has(provider));
    if (unknownProviders.length > 0) {
      throw new ApiError('invalid_request', `Unknown provider ${unknownProviders.join(', ')}. Known providers: ${[...this.knownProviders].join(', ')}.`, {
        param: 'allowed_providers',
      });
    }
    const unknownModels = (input.allowed_models ?? []).filter((model) => !this.catalog.has(model));
    if (unknownModels.length > 0) throw new ApiError('invalid_request', unknownModelMessage(unknownModels, this.catalog), { param: 'allowed_models' });
  }

  /** The hook's settings as stored, its URL checked (400 naming `moderation_hook.url`); what a change leaves out, the current hook's. */
  private hookSettings(input: HookChange, current?: StoredModerationHook): StoredModerationHook {
    const problem = moderationHookUrlProblem(input.url, this.hooks.allowPrivateNetworks);
    if (problem) throw new ApiError('invalid_request', `moderation_hook.url ${problem}.`, { param: 'moderation_hook.url' });
    const failureMode = input.failure_mode ?? current?.failure_mode;
    if (failureMode === undefined) {
      throw new ApiError('invalid_request', 'moderation_hook.failure_mode: required when the project has no hook yet (fail_open or fail_closed).', {
        param: 'moderation_hook.failure_mode',
      });
    }
    return { url: input.url, timeout_ms: input.timeout_ms ?? current?.timeout_ms ?? DEFAULT_HOOK_TIMEOUT_MS, failure_mode: failureMode };
  }

  /** A new hook secret: in clear for the one response that shows it, sealed (bound to the project) for the row. */
  private newHookSecret(projectId: string): { secret: string; sealed: string } {
    const secret = generateWebhookSecret();
    return { secret, sealed: this.hooks.secrets.sealForProjectHook(projectId, secret) };
  }

  private async requireProject(id: string, db: projects.Db = this.db, options: { lock?: boolean } = {}): Promise<ProjectRow> {
    const row = await projects.findProjectById(db, id, options);
    if (!row) throw projectNotFound(id);
    return row;
  }

  /** One change of a project with its audit event, then its keys dropped from every replica's key cache. */
  private async changeProject(
    id: string,
    action: string,
    audit: AuditContext,
    change: (trx: projects.Db, current: ProjectRow, now: number) => Promise<ProjectRow>,
    audited: (row: ProjectRow, now: number) => Record<string, unknown> = toProjectResource,
  ): Promise<ProjectResource> {
    const now = this.clock.now();
    const result = await withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await this.requireProject(id, trx, { lock: true });
      const row = await change(trx, current, now);
      return { result: toProjectResource(row, now), change: updateChange(action, id, audited(current, now), audited(row, now)) };
    });
    await this.onKeysChanged(await projects.projectKeyIds(this.db, id));
    return result;
  }

  private async update(trx: projects.Db, id: string, changes: Parameters<typeof projects.updateProject>[2], now: number): Promise<ProjectRow> {
    const row = await projects.updateProject(trx, id, { ...changes, updated_at: now });
    if (!row) throw projectNotFound(id);
    return row;
  }

  /** `scopes`: the asking admin's, for the hook's URL (checkHookScope). */
  async createProject(input: CreateProjectInput, audit: AuditContext, scopes: readonly AdminScope[]): Promise<ProjectResource> {
    this.checkLists(input);
    const hook = input.moderation_hook == null ? null : this.hookSettings(input.moderation_hook);
    checkHookScope(scopes, hook, undefined);
    const now = this.clock.now();
    const id = newId('prj');
    const hookSecret = hook === null ? null : this.newHookSecret(id);
    const row: ProjectRow = {
      id,
      name: input.name,
      owner: input.owner,
      status: 'active',
      credits_quota: input.credits_quota,
      credits_used: 0,
      quota_period_days: input.quota_period_days,
      period_started_at: now,
      usage_epoch: 1,
      rate_limit_rpm: input.rate_limit_rpm ?? null,
      max_concurrent: input.max_concurrent ?? null,
      allowed_providers: input.allowed_providers == null ? null : JSON.stringify(input.allowed_providers),
      allowed_models: input.allowed_models == null ? null : JSON.stringify(input.allowed_models),
      prompt_rules: input.prompt_rules == null ? null : storedPromptRules(input.prompt_rules),
      prompt_retention: input.prompt_retention ?? null,
      metadata: JSON.stringify(input.metadata ?? {}),
      created_at: now,
      updated_at: now,
      disabled_at: null,
      moderation_hook: hook === null ? null : JSON.stringify(hook),
      moderation_hook_secret: hookSecret?.sealed ?? null,
    };
    return withAuditEvent(this.db, audit, now, async (trx) => {
      await projects.insertProject(trx, row);
      const created = toProjectResource(row, now);
      // The secret never reaches the audit log (as a webhook endpoint's): the response alone shows it, once.
      return { result: withHookSecret(created, hookSecret?.secret), change: { action: 'project.created', target: row.id, before: null, after: created } };
    });
  }

  async listProjects(query: { status?: ProjectStatus; owner?: string; limit?: number; cursor?: string }): Promise<ProjectList> {
    const limit = query.limit ?? 20;
    const now = this.clock.now();
    const rows = await projects.listProjects(this.db, {
      status: query.status,
      owner: query.owner,
      limit,
      after: query.cursor === undefined ? undefined : this.cursors.position(query.cursor, 'prj'),
    });
    const { page, nextCursor } = this.cursors.pageOf(rows, limit, 'prj');
    return { data: page.map((row) => toProjectResource(row, now)), next_cursor: nextCursor };
  }

  async getProject(id: string): Promise<ProjectResource> {
    return toProjectResource(await this.requireProject(id), this.clock.now());
  }

  /** A page of the project's keys (404 for an unknown project). */
  async listProjectKeys(id: string, query: { limit?: number; cursor?: string }): Promise<KeyList> {
    await this.requireProject(id);
    return this.keys.listKeys({ ...query, projectId: id });
  }

  /** `scopes`: the asking admin's, for the hook's URL (checkHookScope). */
  async updateProject(id: string, input: UpdateProjectInput, audit: AuditContext, scopes: readonly AdminScope[]): Promise<ProjectResource> {
    this.checkLists(input);
    let madeSecret: string | undefined;
    const updated = await this.changeProject(id, 'project.updated', audit, async (trx, current, now) => {
      const hookChange = input.moderation_hook;
      const currentHook = current.moderation_hook == null ? undefined : (JSON.parse(current.moderation_hook) as StoredModerationHook);
      const hook = hookChange == null ? hookChange : this.hookSettings(hookChange, currentHook);
      checkHookScope(scopes, hook, currentHook);
      const changes: Parameters<typeof projects.updateProject>[2] = {};
      if (input.name !== undefined) changes.name = input.name;
      if (input.owner !== undefined) changes.owner = input.owner;
      if (input.rate_limit_rpm !== undefined) changes.rate_limit_rpm = input.rate_limit_rpm;
      if (input.max_concurrent !== undefined) changes.max_concurrent = input.max_concurrent;
      if (input.allowed_providers !== undefined) changes.allowed_providers = input.allowed_providers === null ? null : JSON.stringify(input.allowed_providers);
      if (input.allowed_models !== undefined) changes.allowed_models = input.allowed_models === null ? null : JSON.stringify(input.allowed_models);
      if (input.prompt_rules !== undefined) changes.prompt_rules = input.prompt_rules === null ? null : storedPromptRules(input.prompt_rules);
      // A tightening reaches the generations settled before it at the next sweep (src/maintenance/prompt-retention.ts),
      // and the completion webhooks still to be delivered now: none sent after this change carries a prompt.
      if (input.prompt_retention !== undefined) changes.prompt_retention = input.prompt_retention;
      if (input.prompt_retention === 'hash' || input.prompt_retention === 'none') await withholdPendingCompletions(trx, id, input.prompt_retention);
      if (input.metadata !== undefined) changes.metadata = JSON.stringify(input.metadata);
      if (hook === null) {
        Object.assign(changes, {
          moderation_hook: null,
          moderation_hook_secret: null,
          moderation_hook_previous_secret: null,
          moderation_hook_previous_secret_expires_at: null,
        });
      }
      if (hook !== undefined && hook !== null) {
        changes.moderation_hook = JSON.stringify(hook);
        // A hook set where there was none gets a secret; a changed one keeps its own (as a webhook endpoint's URL change does).
        if (current.moderation_hook_secret == null) {
          const made = this.newHookSecret(id);
          changes.moderation_hook_secret = made.sealed;
          madeSecret = made.secret;
        }
      }
      if (input.status !== undefined && input.status !== current.status) {
        changes.status = input.status;
        changes.disabled_at = input.status === 'disabled' ? now : null;
      }
      return this.update(trx, id, changes, now);
    });
    return withHookSecret(updated, madeSecret);
  }

  /**
   * A new secret for the project's hook, in clear in this response only; the old one keeps signing the
   * hook's calls (a second signature) for `overlapSeconds`, so the endpoint switches without refusing a
   * call. Always audited, never with either secret. 404 `moderation_hook_not_found` without a hook.
   */
  async rotateModerationHookSecret(id: string, overlapSeconds: number, audit: AuditContext): Promise<ProjectResource> {
    const now = this.clock.now();
    const made = this.newHookSecret(id);
    const rotated = await withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await this.requireProject(id, trx, { lock: true });
      if (current.moderation_hook == null || current.moderation_hook_secret == null) {
        throw new ApiError('moderation_hook_not_found', `Project ${id} has no moderation hook.`, { param: 'id' });
      }
      const row = await this.update(
        trx,
        id,
        {
          moderation_hook_secret: made.sealed,
          moderation_hook_previous_secret: current.moderation_hook_secret,
          moderation_hook_previous_secret_expires_at: now + overlapSeconds * 1000,
        },
        now,
      );
      const overlapEnd = (project: ProjectRow) => toIsoOrNull(overlapEndOf(project, now));
      return {
        result: toProjectResource(row, now),
        change: {
          action: 'project.moderation_hook_secret_rotated',
          target: id,
          // Named apart from the secret: the audit log redacts every field named like one.
          before: { overlap_ends_at: overlapEnd(current) },
          after: { overlap_ends_at: overlapEnd(row), secret: REDACTED },
        },
      };
    });
    await this.onKeysChanged(await projects.projectKeyIds(this.db, id));
    return withHookSecret(rotated, made.secret);
  }

  /** Idempotent: disabling a disabled project changes (and records) nothing. */
  async disableProject(id: string, audit: AuditContext): Promise<ProjectResource> {
    return this.changeProject(id, 'project.disabled', audit, async (trx, current, now) =>
      current.status === 'disabled' ? current : this.update(trx, id, { status: 'disabled', disabled_at: now }, now),
    );
  }

  async setQuota(id: string, input: SetProjectQuotaInput, audit: AuditContext): Promise<ProjectResource> {
    return this.changeProject(
      id,
      'project.quota_set',
      audit,
      async (trx, _current, now) => {
        // Usage and period are decided in the statement, from the row as it is then (as a key's quota).
        const row = await projects.setProjectQuota(trx, id, requestedQuota(input, now));
        if (!row) throw projectNotFound(id);
        return row;
      },
      // The book as well, so reset_usage with nothing used still leaves its event.
      (row, now) => ({ ...toProjectResource(row, now), usage_epoch: row.usage_epoch }),
    );
  }
}

/** The resource with the hook's secret in clear, in the one response of the request that made it. */
function withHookSecret(resource: ProjectResource, secret: string | undefined): ProjectResource {
  if (secret === undefined || resource.moderation_hook === null) return resource;
  return { ...resource, moderation_hook: { ...resource.moderation_hook, secret } };
}
