import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';

/**
 * What the gateway keeps of a prompt once its generation is settled: `full` (the stored request keeps
 * it, until the row's own retention), `hash` (only its SHA-256, hex) or `none` (neither). While a
 * generation runs its worker needs the prompt, so the policy applies to settled rows only. The
 * request's input images (and masks) follow the same rule for their bytes: under `hash` or `none`
 * their URLs expire when the prompt is withheld, and the image sweep deletes the bytes (their rows
 * keep the SHA-256, the ETag, until the tombstone goes).
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
 * UPDATE (still settled, still unmarked), so replicas sweeping at once do each row once, and its
 * input images expire at `now` in the same transaction.
 */
export async function applyPromptRetention(db: Kysely<Database>, policy: PromptRetention, now: number): Promise<number> {
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
      const withheld = await db.transaction().execute(async (trx) => {
        const result = await trx
          .updateTable('generations')
          .set({ prompt_retention: policy, ...(request === null ? {} : { request }) })
          .where('id', '=', row.id)
          .where('prompt_retention', 'is', null)
          .where('status', 'in', ['succeeded', 'failed', 'canceled'])
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
