import { createHash } from 'node:crypto';
import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Database } from '../db/schema';

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
    const rows = await db.selectFrom('generations').select(['id', 'request', 'prompt_retention']).where(eligible).limit(BATCH).execute();
    if (rows.length === 0) break;
    for (const row of rows) {
      const request = row.request === null ? null : withheldRequest(row.request, target);
      const withheld = await db.transaction().execute(async (trx) => {
        const result = await trx
          .updateTable('generations')
          .set({ prompt_retention: target, ...(request === null ? {} : { request }) })
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
        return true;
      });
      if (withheld) changed += 1;
    }
    if (rows.length < BATCH) break;
  }
  return changed;
}
