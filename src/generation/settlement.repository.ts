import { CompiledQuery, type Kysely } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { Database, GenerationAttemptsTable, GenerationsTable } from '../db/schema';
import { capabilitiesOf } from '../db/storage-capabilities';
import { releaseCredits } from '../keys/keys.repository';
import { releaseProjectCredits } from '../projects/projects.repository';
import { endedCostUsd } from '../usage/upstream-cost';
import { addSettledGenerationUsage, latencyBucketParameter, rollupChannelOf, settledUsageCtes, subtractRefundedUsage } from '../usage/usage-rollups.repository';
import { ATTEMPT_COLUMNS, insertAttempts } from './attempts.repository';
import { ACTIVE_STATUSES } from './generations.repository';

/**
 * The settlement's SQL: how an active generation ends (succeeded, failed, canceled) and what its key
 * is charged. Success writes the attempt rows in the same atomic step (settleGeneration,
 * settleGenerations); failure and cancel release the credits not kept (failGeneration, cancelGeneration).
 */
type Db = Kysely<Database>;

const completeGenerationQuery = preparedQuery<
  {
    id: string;
    status: string;
    errorCode: string | null;
    errorMessage: string | null;
    latencyMs: number | null;
    completedAt: number;
    upstreamCostUsd: number | null;
  },
  never
>(['id', 'status', 'errorCode', 'errorMessage', 'latencyMs', 'completedAt', 'upstreamCostUsd'], (db, p) =>
  db
    .updateTable('generations')
    .set({
      status: p.status,
      error_code: p.errorCode,
      error_message: p.errorMessage,
      latency_ms: p.latencyMs,
      completed_at: p.completedAt,
      lease_owner: null,
      lease_expires_at: null,
      upstream_cost_usd: p.upstreamCostUsd,
    })
    .where('id', '=', p.id)
    .where('status', 'in', ['queued', 'running']),
);

/**
 * Settles an active (queued or running) generation; false when it was no longer active (settled
 * elsewhere: canceled, abandoned by the sweeper, or finished by a worker that took it over), so
 * the caller must not release its credits again.
 */
export async function completeGeneration(
  db: Db,
  id: string,
  outcome: {
    status: 'succeeded' | 'failed' | 'canceled';
    errorCode: string | null;
    errorMessage?: string | null;
    latencyMs: number | null;
    completedAt: number;
    /** The upstream's estimated cost in US dollars (src/usage/upstream-cost.ts); null when unknown. */
    upstreamCostUsd?: number | null;
  },
): Promise<boolean> {
  const result = await completeGenerationQuery(db, {
    id,
    ...outcome,
    errorMessage: outcome.errorMessage ?? null,
    upstreamCostUsd: outcome.upstreamCostUsd ?? null,
  });
  const settled = Number(result.numAffectedRows ?? 0) === 1;
  if (settled) await addSettledGenerationUsage(db, id, outcome.status === 'succeeded' ? outcome.latencyMs : null);
  return settled;
}

/** The settlement statement on PostgreSQL, by number of attempt rows. */
const settleStatements = new Map<number, string>();

/** What the settlement statements' UPDATE returns: the usage rollups' inputs. */
const SETTLED_COLUMNS = 'id, key_id, model, provider, images, credits, completed_at, upstream_cost_usd';

function settleStatement(attempts: number): string {
  let text = settleStatements.get(attempts);
  if (text === undefined) {
    // The rollup's channel and latency bucket follow the attempt rows' parameters.
    const usage = 7 + attempts * ATTEMPT_COLUMNS.length;
    const rows = Array.from(
      { length: attempts },
      (_, row) => `(${ATTEMPT_COLUMNS.map((_, column) => `$${7 + row * ATTEMPT_COLUMNS.length + column}`).join(', ')})`,
    );
    text =
      (attempts > 0
        ? `WITH a AS (INSERT INTO generation_attempts (${ATTEMPT_COLUMNS.join(', ')}) VALUES ${rows.join(', ')} ON CONFLICT (generation_id, seq) DO NOTHING), `
        : 'WITH ') +
      `u AS (UPDATE generations SET status = $2, error_code = $3, error_message = $4, latency_ms = $5, completed_at = $6, lease_owner = NULL, lease_expires_at = NULL, ` +
      `upstream_cost_usd = $${usage + 2}::double precision ` +
      `WHERE id = $1 AND status IN ('queued', 'running') RETURNING ${SETTLED_COLUMNS}), ` +
      `${settledUsageCtes({ settled: 'u', from: 'u', channel: `$${usage}::text`, latencyBucket: `$${usage + 1}::int` })} SELECT count(*)::int AS n FROM u`;
    settleStatements.set(attempts, text);
  }
  return text;
}

/**
 * completeGeneration() with the generation's attempt rows written in the same atomic step: on
 * PostgreSQL one statement (the attempts are inserted whether or not the row was still active:
 * they record calls that were made, whoever settled the generation), on SQLite two in the caller's transaction. Run it through `writes.single`.
 */
export async function settleGeneration(db: Db, id: string, outcome: Settlement['outcome'], attempts: readonly GenerationAttemptsTable[]): Promise<boolean> {
  if (!capabilitiesOf(db).oneStatementWrites) {
    await insertAttempts(db, [...attempts]);
    return completeGeneration(db, id, outcome);
  }
  const parameters: unknown[] = [id, outcome.status, outcome.errorCode, null, outcome.latencyMs, outcome.completedAt];
  for (const row of attempts) for (const column of ATTEMPT_COLUMNS) parameters.push(row[column] ?? null);
  parameters.push(rollupChannelOf(attempts), latencyBucketParameter(outcome.latencyMs), outcome.upstreamCostUsd ?? null);
  const result = await db.executeQuery<{ n: number }>(CompiledQuery.raw(settleStatement(attempts.length), parameters));
  return Number(result.rows[0]?.n ?? 0) === 1;
}

/**
 * Settles a success charged other than it reserved, in the caller's transaction: a generation with
 * fallbacks reserved for the dearest model of its chain (src/generation/charges.ts), and one of them
 * delivered. The row takes the delivering model, its provider and the charge (`requested_model` the
 * model asked for, when another delivered); the rest of the reservation goes back to the book it was
 * taken from; completeGeneration then adds the charge to the rollups. `unbilled`: what the models
 * before it may have made (the operator's loss). False when the row was no longer active.
 */
export async function settleDelivered(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  delivered: { model: string; provider: string; requestedModel: string; credits: number; unbilled?: Unbilled | undefined },
  outcome: Settlement['outcome'],
  attempts: readonly GenerationAttemptsTable[],
): Promise<boolean> {
  await insertAttempts(trx, [...attempts]);
  const charged = Math.min(delivered.credits, generation.credits);
  const repriced = await trx
    .updateTable('generations')
    .set({
      model: delivered.model,
      provider: delivered.provider,
      requested_model: delivered.model === delivered.requestedModel ? null : delivered.requestedModel,
      credits: charged,
    })
    .where('id', '=', generation.id)
    .where('status', 'in', [...ACTIVE_STATUSES])
    .executeTakeFirst();
  if (Number(repriced.numUpdatedRows) !== 1 || !(await completeGeneration(trx, generation.id, outcome))) return false;
  if (generation.key_id !== null && generation.usage_epoch !== null && generation.credits > charged) {
    await releaseCredits(trx, generation.key_id, generation.credits - charged, generation.usage_epoch);
    await releaseProjectCredits(trx, generation.id, generation.credits - charged);
  }
  if (delivered.unbilled) await recordUnbilled(trx, generation.id, delivered.unbilled);
  return true;
}

/** One settlement of settleGenerations(): what settleGeneration() takes. */
export interface Settlement {
  id: string;
  outcome: { status: 'succeeded'; errorCode: null; latencyMs: number | null; completedAt: number; upstreamCostUsd?: number | null };
  attempts: readonly GenerationAttemptsTable[];
}

/** PostgreSQL types of the attempt columns, for unnest() of their arrays. */
const ATTEMPT_TYPES: Record<(typeof ATTEMPT_COLUMNS)[number], string> = {
  generation_id: 'text',
  seq: 'int',
  image_index: 'int',
  channel_id: 'text',
  outcome: 'text',
  error_code: 'text',
  latency_ms: 'int',
  started_at: 'bigint',
  model: 'text',
  upstream_usage: 'text',
};
const SETTLE_MANY_STATEMENT =
  `WITH s AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $${5 + ATTEMPT_COLUMNS.length}::text[], $${6 + ATTEMPT_COLUMNS.length}::int[], ` +
  `$${7 + ATTEMPT_COLUMNS.length}::double precision[]) AS s(id, status, latency_ms, completed_at, channel_id, latency_bucket, upstream_cost_usd)), ` +
  `a AS (INSERT INTO generation_attempts (${ATTEMPT_COLUMNS.join(', ')}) SELECT * FROM unnest(${ATTEMPT_COLUMNS.map((column, i) => `$${5 + i}::${ATTEMPT_TYPES[column]}[]`).join(', ')}) ` +
  `ON CONFLICT (generation_id, seq) DO NOTHING), ` +
  // The rows locked in id order first, as lease renewals (an IN list on the primary key) lock them: the two never deadlock.
  `l AS (SELECT id FROM generations WHERE id IN (SELECT id FROM s) ORDER BY id FOR NO KEY UPDATE), ` +
  `u AS (UPDATE generations g SET status = s.status, error_code = NULL, error_message = NULL, latency_ms = s.latency_ms, completed_at = s.completed_at, ` +
  `lease_owner = NULL, lease_expires_at = NULL, upstream_cost_usd = s.upstream_cost_usd FROM s WHERE g.id = s.id AND g.id IN (SELECT id FROM l) AND g.status IN ('queued', 'running') ` +
  `RETURNING ${SETTLED_COLUMNS.split(', ')
    .map((column) => `g.${column}`)
    .join(', ')}), ` +
  `${settledUsageCtes({ settled: 'u', from: 'u JOIN s ON s.id = u.id', channel: 's.channel_id', latencyBucket: 's.latency_bucket' })} ` +
  `SELECT id FROM u`;

/**
 * settleGeneration() for several generations in ONE PostgreSQL statement (the request path's
 * settlements batched by StatementBatcher): each settles exactly as it would alone, since each
 * touches only its own generation row and attempt rows. Answers, in order, whether each was settled.
 */
export async function settleGenerations(db: Db, settlements: readonly Settlement[]): Promise<boolean[]> {
  const columns: unknown[][] = [[], [], [], []];
  const attemptColumns: unknown[][] = ATTEMPT_COLUMNS.map(() => []);
  const usageColumns: unknown[][] = [[], [], []];
  for (const { id, outcome, attempts } of settlements) {
    columns[0]!.push(id);
    columns[1]!.push(outcome.status);
    columns[2]!.push(outcome.latencyMs);
    columns[3]!.push(outcome.completedAt);
    for (const row of attempts) ATTEMPT_COLUMNS.forEach((column, i) => attemptColumns[i]!.push(row[column] ?? null));
    usageColumns[0]!.push(rollupChannelOf(attempts));
    usageColumns[1]!.push(latencyBucketParameter(outcome.latencyMs));
    usageColumns[2]!.push(outcome.upstreamCostUsd ?? null);
  }
  const result = await db.executeQuery<{ id: string }>(CompiledQuery.raw(SETTLE_MANY_STATEMENT, [...columns, ...attemptColumns, ...usageColumns]));
  const settled = new Set(result.rows.map((row) => row.id));
  return settlements.map((settlement) => settled.has(settlement.id));
}

/**
 * Fails (or cancels) an active generation and gives its credits back to the book they were charged to, in one
 * transaction: the request's own failure path and the sweeper both come here, and whichever marks
 * the row first releases; the other changes nothing. False when the row was no longer pending.
 */
export async function failGeneration(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  outcome: {
    errorCode: string;
    errorMessage?: string | null;
    latencyMs: number | null;
    completedAt: number;
    status?: 'failed' | 'canceled';
    /** Credits the key keeps (a disconnect after upstream calls were sent: src/generation/charges.ts); the rest is released. */
    chargedCredits?: number;
    unbilled?: Unbilled;
  },
): Promise<boolean> {
  const charged = outcome.chargedCredits ?? 0;
  const billedImages = outcome.unbilled?.images ?? 0;
  const failed = await completeGenerationQuery(trx, {
    id: generation.id,
    status: outcome.status ?? 'failed',
    errorCode: outcome.errorCode,
    errorMessage: outcome.errorMessage ?? null,
    latencyMs: outcome.latencyMs,
    completedAt: outcome.completedAt,
    upstreamCostUsd: await endedCost(trx, generation.id, charged, billedImages),
  });
  if (Number(failed.numAffectedRows ?? 0) !== 1) return false;
  await keepAndRelease(trx, generation, charged);
  if (outcome.unbilled) await recordUnbilled(trx, generation.id, outcome.unbilled);
  return true;
}

/**
 * The upstream's estimated cost of a generation ending without delivering (upstream-cost.ts
 * endedCostUsd): the images of the credits it keeps and those booked as the loss. Null when nothing
 * was billed upstream on a model without a money price; 0 when nothing was billed on one with it.
 */
async function endedCost(trx: Db, id: string, keptCredits: number, billedImages: number): Promise<number | null> {
  const row = await trx.selectFrom('generations').select(['id', 'request', 'model', 'credits', 'images']).where('id', '=', id).executeTakeFirst();
  return row ? endedCostUsd(row, keptCredits, billedImages) : null;
}

/** Images made upstream that no key paid for, and why (src/generation/charges.ts). */
export interface Unbilled {
  images: number;
  reason: string;
}

/** Records the operator's loss on an ended generation. */
export async function recordUnbilled(db: Db, id: string, unbilled: Unbilled): Promise<void> {
  await db.updateTable('generations').set({ unbilled_images: unbilled.images, unbilled_reason: unbilled.reason }).where('id', '=', id).execute();
}

/** The key keeps `charged` of the generation's reserved credits; the rest goes back to the book they were charged to. */
async function keepAndRelease(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  charged: number,
  errorMessage?: string,
): Promise<void> {
  if (charged > 0) {
    await trx
      .updateTable('generations')
      .set({ charged_credits: charged, ...(errorMessage !== undefined ? { error_message: errorMessage } : {}) })
      .where('id', '=', generation.id)
      .execute();
  }
  // Internal generations (no key) reserved nothing.
  if (generation.key_id !== null && generation.usage_epoch !== null && generation.credits > charged) {
    await releaseCredits(trx, generation.key_id, generation.credits - charged, generation.usage_epoch);
    await releaseProjectCredits(trx, generation.id, generation.credits - charged);
  }
  await addSettledGenerationUsage(trx, generation.id, null);
}

/**
 * Cancels an active generation in the caller's transaction, or answers undefined when it had already
 * ended. The conditional update decides against a finishing run, a sweeper or another cancel exactly
 * once; `charge` is then asked, with the status the row was canceled from (its row locked by the
 * update), how many credits the key keeps; the rest is released.
 */
export async function cancelGeneration(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  outcome: { errorMessage: (chargedCredits: number) => string; completedAt: number },
  charge: (from: 'queued' | 'running') => Promise<number>,
): Promise<{ chargedCredits: number } | undefined> {
  for (const from of ACTIVE_STATUSES) {
    const result = await trx
      .updateTable('generations')
      .set({
        status: 'canceled',
        error_code: 'canceled',
        error_message: outcome.errorMessage(0),
        latency_ms: null,
        completed_at: outcome.completedAt,
        lease_owner: null,
        lease_expires_at: null,
        cancel_requested: 1,
      })
      .where('id', '=', generation.id)
      .where('status', '=', from)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) continue;
    const chargedCredits = Math.min(await charge(from), generation.credits);
    if (chargedCredits > 0) {
      await trx
        .updateTable('generations')
        .set({ upstream_cost_usd: await endedCost(trx, generation.id, chargedCredits, 0) })
        .where('id', '=', generation.id)
        .execute();
    }
    await keepAndRelease(trx, generation, chargedCredits, outcome.errorMessage(chargedCredits));
    return { chargedCredits };
  }
  return undefined;
}

/**
 * A canceled synchronous run that learned of its cancel before sending all its calls: the cancel kept
 * every image's credits (the database cannot know what a synchronous run sent), so the run, which
 * knows, gives back the credits of the calls it never sent. Conditional, so it lowers the charge once.
 */
export async function refundUnsentCalls(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  sentCredits: number,
): Promise<number> {
  const row = await trx
    .selectFrom('generations')
    .select(['charged_credits', 'upstream_cost_usd'])
    .where('id', '=', generation.id)
    .where('status', '=', 'canceled')
    .executeTakeFirst();
  const charged = Number(row?.charged_credits ?? 0);
  if (charged <= sentCredits) return 0;
  // The cost of the kept calls goes down with their credits (both priced per image sent).
  const cost = row?.upstream_cost_usd === null || row?.upstream_cost_usd === undefined ? null : Number(row.upstream_cost_usd);
  const keptCost = cost === null ? null : Math.round(((cost * sentCredits) / charged) * 1_000_000) / 1_000_000;
  const result = await trx
    .updateTable('generations')
    .set({ charged_credits: sentCredits, upstream_cost_usd: keptCost })
    .where('id', '=', generation.id)
    .where('status', '=', 'canceled')
    .where('charged_credits', '=', charged)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return 0;
  if (generation.key_id !== null && generation.usage_epoch !== null) {
    await releaseCredits(trx, generation.key_id, charged - sentCredits, generation.usage_epoch);
    await releaseProjectCredits(trx, generation.id, charged - sentCredits);
  }
  await subtractRefundedUsage(trx, generation.id, charged - sentCredits, cost === null || keptCost === null ? null : cost - keptCost);
  return charged - sentCredits;
}
