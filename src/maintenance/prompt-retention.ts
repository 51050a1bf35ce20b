import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';

/**
 * What the gateway keeps of a prompt once its generation is settled: `full` (the stored request keeps
 * it, until the row's own retention), `hash` (only its SHA-256, hex) or `none` (neither). While a
 * generation runs its worker needs the prompt, so the policy applies to settled rows only.
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

/**
 * The stored request (generations.request, JSON) with its prompt removed under `policy`: the prompt
 * becomes empty, and `hash` keeps `prompt_sha256` beside it. Pure; null for a request without a prompt.
 */
export function withheldRequest(requestJson: string, policy: Exclude<PromptRetention, 'full'>): string | null {
  const stored = JSON.parse(requestJson) as { request?: { prompt?: unknown; prompt_sha256?: string } };
  const prompt = stored.request?.prompt;
  if (typeof prompt !== 'string' || stored.request === undefined) return null;
  stored.request.prompt = '';
  if (policy === 'hash') stored.request.prompt_sha256 = promptSha256(prompt);
  return JSON.stringify(stored);
}

/**
 * Applies `policy` to settled generations that still keep their prompt (prompt_retention null);
 * answers how many rows it changed. `full` changes nothing. Each row is rewritten by a conditional
 * UPDATE (still settled, still unmarked), so replicas sweeping at once do each row once.
 */
export async function applyPromptRetention(db: Kysely<Database>, policy: PromptRetention): Promise<number> {
  if (policy === 'full') return 0;
  let changed = 0;
  for (let batch = 0; batch < BATCHES_PER_SWEEP; batch += 1) {
    const rows = await db
      .selectFrom('generations')
      .select(['id', 'request'])
      .where('prompt_retention', 'is', null)
      .where('status', 'in', ['succeeded', 'failed', 'canceled'])
      .limit(BATCH)
      .execute();
    if (rows.length === 0) break;
    for (const row of rows) {
      const request = row.request === null ? null : withheldRequest(row.request, policy);
      const result = await db
        .updateTable('generations')
        .set({ prompt_retention: policy, ...(request === null ? {} : { request }) })
        .where('id', '=', row.id)
        .where('prompt_retention', 'is', null)
        .where('status', 'in', ['succeeded', 'failed', 'canceled'])
        .executeTakeFirst();
      changed += Number(result.numUpdatedRows);
    }
    if (rows.length < BATCH) break;
  }
  return changed;
}
