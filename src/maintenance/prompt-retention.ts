import { createHash } from 'node:crypto';
import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema';
import { completionEventKey } from '../generation/completion-webhooks';
import { redactPrompt } from '../providers/redaction';

/**
 * What the gateway keeps of a prompt once its generation is settled: `full` (the stored request keeps
 * it, until the row's own retention), `hash` (only its SHA-256, hex) or `none` (neither). While a
 * generation runs its worker needs the prompt, so the policy applies to settled rows only. The
 * request's input images (and masks) follow the same rule for their bytes: under `hash` or `none`
 * their URLs expire when the prompt is withheld, and the image sweep deletes the bytes (their rows
 * keep the SHA-256, the ETag, until the tombstone goes).
 *
 * The policy of a generation is its project's `prompt_retention` (generations.project_id: the project
 * its key was in when it was created), else the gateway's PROMPT_RETENTION (also for internal
 * generations, which have no key). A policy only ever tightens what a row keeps: `hash` rows become
 * `none` when their policy does, and a loosened policy restores nothing (it cannot).
 *
 * Withholding a prompt reaches every copy the gateway kept of it: the stored request, the upstream's
 * error text and the moderation hook's reason where they quote it (redactPrompt: `[prompt]`), and the
 * completion webhook's event (the `events` row its deliveries, sent or not yet, are read from).
 */
export type PromptRetention = 'full' | 'hash' | 'none';

export const PROMPT_RETENTIONS: readonly PromptRetention[] = ['full', 'hash', 'none'];

/** Rows per statement, and statements per sweep: a backlog (a policy just tightened) goes over several sweeps. */
const BATCH = 500;
const BATCHES_PER_SWEEP = 20;

/** The SHA-256 (hex) a `hash` policy keeps of a prompt: a client can check a prompt it still has against it. */
export function promptSha256(prompt: string): string {
  return createHash('sha256').update(prompt, 'utf8').digest('hex');
}

const STRICTNESS: Record<PromptRetention, number> = { full: 0, hash: 1, none: 2 };

/** The stricter of two policies: what a row keeps once both applied. */
export function stricterRetention(a: PromptRetention, b: PromptRetention): PromptRetention {
  return STRICTNESS[a] >= STRICTNESS[b] ? a : b;
}

/**
 * The stored request (generations.request, JSON) with its prompt removed under `policy`: the prompt
 * (and an internal request's negative prompt) becomes empty, `hash` keeps `prompt_sha256` beside it,
 * `none` drops a hash kept before. Pure; null for a request without a prompt. Applied to a request
 * already withheld under `hash`, `hash` changes nothing and `none` drops the hash.
 */
export function withheldRequest(requestJson: string, policy: Exclude<PromptRetention, 'full'>): string | null {
  const stored = JSON.parse(requestJson) as { request?: { prompt?: unknown; prompt_sha256?: string; negativePrompt?: unknown } };
  const prompt = stored.request?.prompt;
  if (typeof prompt !== 'string' || stored.request === undefined) return null;
  const kept = stored.request.prompt_sha256;
  stored.request.prompt = '';
  if (stored.request.negativePrompt !== undefined) delete stored.request.negativePrompt;
  if (policy === 'hash') stored.request.prompt_sha256 = kept ?? promptSha256(prompt);
  else delete stored.request.prompt_sha256;
  return JSON.stringify(stored);
}

/** The prompts a stored request carries (an internal request's negative prompt too), empty when withheld before. */
function promptsOf(requestJson: string | null): string[] {
  if (requestJson === null) return [];
  const stored = JSON.parse(requestJson) as { request?: { prompt?: unknown; negativePrompt?: unknown } };
  return [stored.request?.prompt, stored.request?.negativePrompt].filter((text): text is string => typeof text === 'string' && text !== '');
}

/** `text` without any of `prompts` (redaction.ts's rule, nothing cut). */
function withoutPrompts(text: string, prompts: readonly string[]): string {
  return prompts.reduce((out, prompt) => redactPrompt(out, prompt), text);
}

/**
 * A completion webhook's event body (`{type, timestamp, data}`, data a generation resource) as
 * `policy` leaves it: no prompt, its hash only under `hash`, the policy named, and every text of it
 * (the error's message, the hook's reason) without `prompts`. Pure.
 */
export function withheldEventPayload(payload: string, policy: Exclude<PromptRetention, 'full'>, prompts: readonly string[]): string {
  const body = JSON.parse(payload) as { data?: Record<string, unknown> };
  const data = body.data;
  if (data === undefined || data === null || typeof data !== 'object') return payload;
  const shown = typeof data.prompt === 'string' ? data.prompt : undefined;
  const known = shown === undefined ? prompts : [shown, ...prompts];
  const kept = typeof data.prompt_sha256 === 'string' ? data.prompt_sha256 : undefined;
  const applied = PROMPT_RETENTIONS.includes(data.prompt_retention as PromptRetention) ? (data.prompt_retention as PromptRetention) : 'full';
  data.prompt = null;
  const retention = stricterRetention(applied, policy);
  data.prompt_sha256 = retention === 'hash' ? (kept ?? (known[0] === undefined ? null : promptSha256(known[0]))) : null;
  data.prompt_retention = retention;
  const scrub = (value: unknown): unknown => {
    if (typeof value === 'string') return withoutPrompts(value, known);
    if (Array.isArray(value)) return value.map(scrub);
    if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([name, inner]) => [name, scrub(inner)]));
    return value;
  };
  return JSON.stringify(scrub(body));
}

/**
 * When a project's policy tightens, in the transaction that changes it: the completion events of its
 * generations that still have a delivery to make are rewritten as `policy` leaves them, so no delivery
 * after the change carries a prompt (the sweep does the rest: the rows, and the events already sent).
 * Answers how many such events it found.
 */
export async function withholdPendingCompletions(trx: Kysely<Database>, projectId: string, policy: Exclude<PromptRetention, 'full'>): Promise<number> {
  // From the deliveries still to be made (few, by the dispatcher's index), to their events and generations.
  const prefix = completionEventKey('');
  const rows = await trx
    .selectFrom('webhook_deliveries as d')
    .innerJoin('events as ev', 'ev.id', 'd.event_id')
    .innerJoin('generations as g', (join) => join.on(sql<boolean>`g.id = substr(ev.dedupe_key, ${sql.lit(prefix.length + 1)})`))
    .select(['ev.id', 'ev.payload', 'g.request'])
    .where('d.status', '=', 'pending')
    .where('d.signing_key_id', 'is not', null)
    .where('ev.dedupe_key', 'like', `${prefix}%`)
    .where('g.project_id', '=', projectId)
    .execute();
  for (const row of rows) {
    const payload = withheldEventPayload(row.payload, policy, promptsOf(row.request));
    if (payload !== row.payload) await trx.updateTable('events').set({ payload }).where('id', '=', row.id).execute();
  }
  return rows.length;
}

/** What a generation resource says of its prompt: the prompt while kept, its hash under `hash`, and the policy. */
export interface PromptView {
  prompt: string | null;
  prompt_sha256: string | null;
  prompt_retention: PromptRetention;
}

const SETTLED = ['succeeded', 'failed', 'canceled'];

/**
 * A generation's prompt as its resource shows it, under `policy` (its project's or the gateway's, now):
 * the stricter of that and what the sweep already applied to the row. A settled row the sweep has not
 * reached yet is shown as it will be (so a read does not depend on when the sweep runs); a running one
 * keeps its prompt, and says the policy that will apply.
 */
export function promptView(row: { status: string; request: string | null; prompt_retention?: string | null }, policy: PromptRetention): PromptView {
  const applied = (row.prompt_retention ?? null) as PromptRetention | null;
  const retention = applied === null ? policy : stricterRetention(applied, policy);
  const stored = row.request === null ? undefined : (JSON.parse(row.request) as { request?: { prompt?: unknown; prompt_sha256?: unknown } }).request;
  const prompt = applied === null && typeof stored?.prompt === 'string' ? stored.prompt : null;
  const kept = retention === 'full' || !SETTLED.includes(row.status);
  let sha256: string | null = null;
  if (retention === 'hash') sha256 = typeof stored?.prompt_sha256 === 'string' ? stored.prompt_sha256 : prompt === null ? null : promptSha256(prompt);
  return { prompt: kept ? prompt : null, prompt_sha256: sha256, prompt_retention: retention };
}

/**
 * The settled generations `target` applies to and that still keep more than it allows: their policy
 * (the project's, else `gateway`) is `target`, and they keep their prompt (prompt_retention null) or,
 * for `none`, only its hash. The same condition guards each row's UPDATE, so a row is rewritten once
 * whichever replica sweeps, and not at all when its project's policy changed in between.
 */
function outstanding(gateway: PromptRetention, target: Exclude<PromptRetention, 'full'>) {
  return (eb: ExpressionBuilder<Database, 'generations'>) => {
    const projectsWith = (policy: string) => eb.selectFrom('projects').select('projects.id').where('projects.prompt_retention', '=', policy);
    const projectsWithAny = eb.selectFrom('projects').select('projects.id').where('projects.prompt_retention', 'is not', null);
    const ofProject = eb('generations.project_id', 'in', projectsWith(target));
    // Rows of no project, or of a project without its own policy, follow the gateway's.
    const ofGateway = eb.or([eb('generations.project_id', 'is', null), eb('generations.project_id', 'not in', projectsWithAny)]);
    return eb.and([
      eb('generations.status', 'in', SETTLED),
      target === 'none'
        ? eb.or([eb('generations.prompt_retention', 'is', null), eb('generations.prompt_retention', '=', 'hash')])
        : eb('generations.prompt_retention', 'is', null),
      gateway === target ? eb.or([ofProject, ofGateway]) : ofProject,
    ]);
  };
}

/**
 * Applies each settled generation's policy (its project's `prompt_retention`, else `gateway`, the
 * PROMPT_RETENTION setting) to the rows that keep more than it allows; answers how many rows it
 * changed. Each row is rewritten by a conditional UPDATE (still settled, still keeping what it kept,
 * still under that policy), so replicas sweeping at once do each row once, and its input images
 * expire at `now` in the same transaction. `none` goes first: a row it withholds is not hashed after.
 */
export async function applyPromptRetention(db: Kysely<Database>, gateway: PromptRetention, now: number): Promise<number> {
  const projectPolicies = await db.selectFrom('projects').select('prompt_retention').distinct().where('prompt_retention', 'in', ['hash', 'none']).execute();
  const targets = (['none', 'hash'] as const).filter((target) => gateway === target || projectPolicies.some((row) => row.prompt_retention === target));
  let changed = 0;
  for (const target of targets) changed += await withhold(db, gateway, target, now);
  return changed;
}

async function withhold(db: Kysely<Database>, gateway: PromptRetention, target: Exclude<PromptRetention, 'full'>, now: number): Promise<number> {
  const eligible = outstanding(gateway, target);
  let changed = 0;
  for (let batch = 0; batch < BATCHES_PER_SWEEP; batch += 1) {
    const rows = await db
      .selectFrom('generations')
      .select(['id', 'request', 'prompt_retention', 'error_message', 'moderation_reason'])
      .where(eligible)
      .limit(BATCH)
      .execute();
    if (rows.length === 0) break;
    for (const row of rows) {
      const request = row.request === null ? null : withheldRequest(row.request, target);
      const prompts = promptsOf(row.request);
      // The texts kept beside the prompt that may quote it: the upstream's error, the hook's reason.
      const quoting = {
        ...(row.error_message == null ? {} : { error_message: withoutPrompts(row.error_message, prompts) }),
        ...(row.moderation_reason == null ? {} : { moderation_reason: withoutPrompts(row.moderation_reason, prompts) }),
      };
      const withheld = await db.transaction().execute(async (trx) => {
        const result = await trx
          .updateTable('generations')
          .set({ prompt_retention: target, ...(request === null ? {} : { request }), ...quoting })
          .where('id', '=', row.id)
          .where('prompt_retention', row.prompt_retention == null ? 'is' : '=', row.prompt_retention ?? null)
          .where(eligible)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) === 0) return false;
        await trx
          .updateTable('stored_images')
          .set({ expires_at: now })
          .where('generation_id', '=', row.id)
          .where('role', 'in', ['input', 'mask'])
          .where('expires_at', '>', now)
          .execute();
        const event = await trx.selectFrom('events').select(['id', 'payload']).where('dedupe_key', '=', completionEventKey(row.id)).executeTakeFirst();
        if (event) {
          const payload = withheldEventPayload(event.payload, target, prompts);
          if (payload !== event.payload) await trx.updateTable('events').set({ payload }).where('id', '=', event.id).execute();
        }
        return true;
      });
      if (withheld) changed += 1;
    }
    if (rows.length < BATCH) break;
  }
  return changed;
}
