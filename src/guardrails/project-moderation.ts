import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { components } from '../../generated/gateway';
import type { GenerationsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import type { ClientProject, ProjectModerationHook } from '../projects/project-policy';
import type { Clock } from '../shared/clock';
import type { WebhookSecrets } from '../webhooks/secret-sealing';
import { type HookFailureMode, type ModerationHookNetwork, type ModerationOutcome, askModerationHook } from './moderation-hook';

type Schemas = components['schemas'];
export type GenerationModeration = Schemas['GenerationModeration'];
export type GenerationModerationDetail = Schemas['GenerationModerationDetail'];

/** What a generation row records of the hook's answer (0029); absent when no hook was asked. */
export type ModerationColumns = Required<Pick<GenerationsTable, 'moderation_decision' | 'moderation_latency_ms' | 'moderation_reason' | 'moderation_failure'>>;

export interface ModerationRequest {
  keyId: string;
  /** The request asking, named in a failure's log line. */
  requestId?: string | undefined;
  model: string;
  prompt: string;
  /** The bytes of the request's input images (and mask), read and checked: the hook is sent their SHA-256. */
  inputs: readonly Buffer[];
}

export interface ProjectModerationDeps {
  /** Opens a project hook's sealed secret (bound to the project id). */
  secrets: Pick<WebhookSecrets, 'openForProjectHook'>;
  /** Ends a rotation's overlap (the time the rotation set it from). */
  clock: Clock;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS, and the CAs to trust (tests' self-signed endpoints). */
  network: ModerationHookNetwork;
  logger: Logger;
}

/**
 * The project's moderation hook on a key's request (issue 38 §2): asked after the prompt rules and
 * the request's own checks passed, before a slot, a stored input or a credit is taken. A block is
 * 400 `moderation_blocked` with the endpoint's reason; a failure under `fail_closed` is 503
 * `moderation_unavailable`; an allow (or a failure under `fail_open`) is what the generation row
 * records. A project without a hook costs nothing here: the hook comes with the key's cached row.
 * The prompt is sent to the endpoint only, never logged: a failure is logged by project, key and why.
 */
export class ProjectModeration {
  constructor(private readonly deps: ProjectModerationDeps) {}

  /** The hook's secret; undefined when it was sealed with a key this gateway no longer has. */
  private openSecret(projectId: string, sealed: string): string | undefined {
    try {
      return this.deps.secrets.openForProjectHook(projectId, sealed);
    } catch {
      return undefined;
    }
  }

  /** The secrets a call is signed with: the hook's, and its old one until a rotation's overlap ends. */
  private signingSecrets(projectId: string, hook: ProjectModerationHook): string[] | undefined {
    const secret = this.openSecret(projectId, hook.sealedSecret);
    if (secret === undefined) return undefined;
    const previous =
      hook.previous !== null && hook.previous.expiresAt > this.deps.clock.now() ? this.openSecret(projectId, hook.previous.sealedSecret) : undefined;
    return previous === undefined ? [secret] : [secret, previous];
  }

  /** The row's columns of an allowed request; throws the refusal of a blocked one. Undefined when the project has no hook. */
  async check(project: ClientProject | null, request: ModerationRequest): Promise<ModerationColumns | undefined> {
    const hook = project?.moderationHook ?? null;
    if (project === null || hook === null) return undefined;
    const secrets = this.signingSecrets(project.id, hook);
    const outcome =
      secrets === undefined
        ? unsigned(hook.failureMode)
        : await askModerationHook(
            { url: hook.url, secrets, timeoutMs: hook.timeoutMs, failureMode: hook.failureMode },
            {
              prompt: request.prompt,
              inputImages: request.inputs.map((bytes) => ({ sha256: createHash('sha256').update(bytes).digest('hex') })),
              model: request.model,
              keyId: request.keyId,
              projectId: project.id,
            },
            this.deps.network,
          );
    if (outcome.failure !== undefined) {
      this.deps.logger.warn(
        {
          request_id: request.requestId,
          project_id: project.id,
          key_id: request.keyId,
          failure: outcome.failure,
          latency_ms: outcome.latencyMs,
          failure_mode: hook.failureMode,
        },
        outcome.failedOpen
          ? 'moderation hook failed; the project fails open, the request goes on'
          : 'moderation hook failed; the project fails closed, the request is refused',
      );
    }
    if (outcome.decision === 'block') throw refusalOf(project.id, outcome);
    return {
      moderation_decision: 'allow',
      moderation_latency_ms: outcome.latencyMs,
      moderation_reason: outcome.reason,
      moderation_failure: outcome.failure ?? null,
    };
  }
}

/** A hook whose secret cannot be opened is never called unsigned: a failure, decided by the project's mode. */
function unsigned(failureMode: HookFailureMode): ModerationOutcome {
  const open = failureMode === 'fail_open';
  return {
    decision: open ? 'allow' : 'block',
    reason: null,
    latencyMs: 0,
    failedOpen: open,
    failure: "the hook's secret cannot be opened (sealing key not configured)",
  };
}

/** 400 moderation_blocked with the endpoint's reason, or 503 moderation_unavailable (failed, fail_closed): neither names the prompt, nor the endpoint. */
function refusalOf(projectId: string, outcome: ModerationOutcome): ApiError {
  if (outcome.failure !== undefined) {
    return new ApiError(
      'moderation_unavailable',
      `The moderation hook of project ${projectId} could not decide (down, slow, or an answer that is not a decision) and the project fails closed; nothing was reserved or charged. Retry later.`,
    );
  }
  const reason = outcome.reason === null || outcome.reason === '' ? ' (no reason given)' : `: ${outcome.reason}`;
  return new ApiError('moderation_blocked', `The moderation hook of project ${projectId} blocked this request${reason}.`, { param: 'prompt' });
}

/** What a key holder reads of the hook's answer on a generation (null when none was asked). */
export function generationModerationOf(row: GenerationsTable): GenerationModeration {
  if (row.moderation_decision == null) return null;
  return {
    decision: 'allow',
    latency_ms: Number(row.moderation_latency_ms ?? 0),
    failed_open: row.moderation_failure != null,
    reason: row.moderation_reason ?? null,
  };
}

/** What operators read: the same, with why the hook failed when the request went on (it may name the endpoint's address). */
export function generationModerationDetailOf(row: GenerationsTable): GenerationModerationDetail {
  const moderation = generationModerationOf(row);
  return moderation === null ? null : { ...moderation, failure: row.moderation_failure ?? null };
}
