import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database, GenerationsTable } from '../db/schema';
import { pruneSettledTasks } from '../generation/durable.repository';
import { findStalePendingGenerations } from '../generation/generations.repository';
import { failGeneration, type Unbilled } from '../generation/settlement.repository';
import { pruneOldGenerations } from './generation-retention';
import { applyPromptRetention, type PromptRetention } from './prompt-retention';
import { IDEMPOTENCY_TTL_MS } from '../idempotency/idempotency.middleware';
import { pruneIdempotencyRecords } from '../idempotency/idempotency.repository';
import type { Clock } from '../shared/clock';

export interface SweepResult {
  abandoned: number;
  idempotencyPruned: number;
  /** Stored images past their retention, deleted with their bytes. */
  imagesDeleted: number;
  /** Settled generation rows past GENERATION_RETENTION_DAYS, deleted (the usage rollups stay). */
  generationsPruned: number;
  /** Settled generations whose prompt was reduced to its hash or removed (PROMPT_RETENTION). */
  promptsWithheld: number;
}

/**
 * Crash safety. A generation whose current run started longer ago than its provider's deadline
 * (plus grace) and is still running was lost with its process and not taken over by any worker
 * (src/generation/generation-worker.ts takes over lapsed leases first): its credits go back and it
 * is marked failed/abandoned. Queued generations wait for a worker and are never swept. Old idempotency records,
 * and 'running' ones of dead processes, are dropped. Safe with several replicas: each row is
 * claimed by one conditional UPDATE before its credits are released.
 */
export interface SweepDeps {
  db: Kysely<Database>;
  clock: Clock;
  /** Per provider: its deadline plus grace. A pending generation older than that was abandoned. */
  staleAfterMs: Record<string, number>;
  /** Deletes images past their retention (src/images). */
  images?: { sweep(): Promise<number> };
  /** Completion webhooks: queues a failed generation's delivery in the transaction that fails it. */
  onSettled?: (trx: Kysely<Database>, generationId: string) => Promise<boolean>;
  /** GENERATION_RETENTION_DAYS in milliseconds: older settled generation rows are deleted; undefined keeps them. */
  generationRetentionMs?: number;
  /** PROMPT_RETENTION: what settled generations keep of their prompt (`full` when absent). */
  promptRetention?: PromptRetention;
}

/**
 * Fails a generation that is still pending and gives its credits back, in one transaction. The
 * row is claimed by a conditional UPDATE first, so whoever runs this (the sweeper on any replica,
 * a retried release) releases the credits once. False when it was no longer pending. `unbilled`:
 * what its run knew the upstream had made (a retried release of a run that failed in an outage).
 */
export async function releasePendingGeneration(
  db: Kysely<Database>,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  errorCode: string,
  now: number,
  onSettled?: SweepDeps['onSettled'],
  unbilled?: Unbilled,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const failed = await failGeneration(trx, generation, { errorCode, latencyMs: null, completedAt: now, ...(unbilled ? { unbilled } : {}) });
    if (failed) await onSettled?.(trx, generation.id);
    return failed;
  });
}

export async function sweepOnce(deps: SweepDeps): Promise<SweepResult> {
  const now = deps.clock.now();
  let abandoned = 0;
  for (const [provider, staleAfterMs] of Object.entries(deps.staleAfterMs)) {
    for (;;) {
      const stale = await findStalePendingGenerations(deps.db, provider, now - staleAfterMs, 500);
      for (const generation of stale) {
        if (await releasePendingGeneration(deps.db, generation, 'abandoned', now, deps.onSettled)) abandoned += 1;
      }
      if (stale.length < 500) break;
    }
  }
  // A 'running' idempotency record whose lease lapsed is renewed by nobody: its request is gone.
  const idempotencyPruned = await pruneIdempotencyRecords(deps.db, now - IDEMPOTENCY_TTL_MS, now);
  // Before the image pass: the input images of a withheld prompt expire here, and their bytes go in that pass.
  const promptsWithheld = await applyPromptRetention(deps.db, deps.promptRetention ?? 'full', now);
  const imagesDeleted = (await deps.images?.sweep()) ?? 0;
  // The upstream-call journal matters only while a generation may be taken over.
  await pruneSettledTasks(deps.db);
  const generationsPruned = deps.generationRetentionMs === undefined ? 0 : await pruneOldGenerations(deps.db, now - deps.generationRetentionMs);
  return { abandoned, idempotencyPruned, imagesDeleted, generationsPruned, promptsWithheld };
}

/** Runs the sweep now and then every `intervalMs` until stopped. */
export async function startSweeper(deps: SweepDeps & { intervalMs: number; logger: Logger }): Promise<() => Promise<void>> {
  const run = async () => {
    try {
      const result = await sweepOnce(deps);
      if (Object.values(result).some((count) => count > 0)) deps.logger.info(result, 'sweep released abandoned work');
    } catch (error) {
      deps.logger.error({ err: error }, 'sweep failed');
    }
  };
  await run();
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= run().finally(() => {
      running = undefined;
    });
  }, deps.intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
