import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { TaskExpired, type UpstreamLosses } from '../channels/channel-failover';
import type { ChannelRouter } from '../channels/channel-router';
import { mayHaveCommitted } from '../db/bounded-pool';
import type { Database, GenerationAttemptsTable, GenerationTasksTable, GenerationsTable } from '../db/schema';
import { databaseBatchOptions, StatementBatcher } from '../db/statement-batcher';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import { dependencyApiError, DependencyUnavailableError, isDatabaseOutage, withChargeOutcome } from '../errors/dependency-errors';
import { ClientDisconnected } from '../http/abort-on-disconnect';
import type { ImagesService } from '../images/images.service';
import type { InputImages } from '../images/inputs/input-images';
import type { GatewayMetrics } from '../metrics/metrics';
import type { Clock } from '../shared/clock';
import { creditsOf, imagesOfCalls, unbilledOf, unbilledOfDelivered } from './charges';
import type { CompletionWebhooks } from './completion-webhooks';
import { sendsNothingUpstream, taskLifeOf } from '../providers/formats';
import { GenerationTaskJournal, type StoredGenerationRequest, callsOf, storedRequestOf } from './durable';
import { listGenerationTasks } from './durable.repository';
import { insertAttempts } from './attempts.repository';
import { LeaseLost, RunDeferred } from './generation-worker';
import { findGeneration } from './generations.repository';
import { reservesInOneStatement } from './reservations.repository';
import { completeGeneration, failGeneration, recordUnbilled, refundUnsentCalls, type Settlement, settleGeneration, settleGenerations, type Unbilled } from './settlement.repository';
import type { GenerationOutcome } from './generation-outcome';
import { imageOwnerOf } from '../images/images.repository';

export interface GenerationRunnerDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  channels: ChannelRouter;
  metrics: GatewayMetrics;
  logger: Logger;
  images: ImagesService;
  /** Reads a stored request's input images back for the provider. */
  inputs: InputImages;
  /** The lease owner of this process's runs (its worker's): the task journal marks sends with it. */
  owner: string;
  completionWebhooks: CompletionWebhooks | undefined;
  /**
   * Called when a failed generation could not be settled either, to release it once the database
   * takes writes; `mayAppear`: its reservation may still commit, so a row not there yet is looked for again.
   */
  onUnsettled?: (generationId: string, errorCode: string, mayAppear?: boolean) => void;
  /** PostgreSQL: the longest one database operation may take; a batched statement's queue counts in it. */
  databaseBudgetMs?: number;
}

/**
 * Runs a claimed generation through its channels to exactly one settlement: the synchronous path
 * (its client waiting) and the worker's background runs alike.
 */
export class GenerationRunner {
  /** Settles a succeeded generation without a completion webhook (most of them): batched on PostgreSQL. */
  private readonly settle: (settlement: Settlement) => Promise<boolean>;

  constructor(private readonly deps: GenerationRunnerDeps) {
    const alone = (settlement: Settlement) => deps.writes.single((db) => settleGeneration(db, settlement.id, settlement.outcome, settlement.attempts));
    if (reservesInOneStatement(deps.db)) {
      // PostgreSQL: concurrent requests' settlements share one statement (SQLite's group commit batches them already).
      const batcher = new StatementBatcher<Settlement, boolean>((settlements) => settleGenerations(deps.db, settlements), alone, {
        maxBatch: 100,
        lanes: 2,
        ...databaseBatchOptions(deps.databaseBudgetMs),
      });
      this.settle = (settlement) => batcher.submit(settlement);
    } else {
      this.settle = alone;
    }
  }

  /**
   * Runs a claimed generation and settles it exactly once: stored images and success (charged),
   * or failure/cancel (credits released). A takeover finds the upstream calls its predecessor sent:
   * an accepted visual task is polled again; a call sent but never acknowledged with a task id
   * (any Ark/images-API call, or a visual submit cut before its answer) cannot be resumed, and
   * sending it again could make the account pay twice, so the generation fails as `abandoned`.
   * `stored`: the row's request as this process wrote it (the synchronous path), not parsed back.
   */
  async execute(row: GenerationsTable, signal: AbortSignal, stored: StoredGenerationRequest = storedRequestOf(row)): Promise<Omit<GenerationOutcome, 'credits'>> {
    const { clock, channels, metrics, writes, db } = this.deps;
    const { entry, request } = stored;
    const started = clock.now();
    // The channel attempts, written here only: with the settlement (the same transaction, or statement), or alone when there is none.
    let attempts: GenerationAttemptsTable[] = [];
    let attemptsWritten = false;
    let attemptsInBackground = false;
    // What the upstream billed beyond the attempts' record (billed but undelivered images, expired tasks): charges.ts books it.
    let losses: UpstreamLosses = { billedUndelivered: 0, expiredCalls: [] };
    const settleFailure = async (error: unknown, code = errorCodeOf(error), unbilled = unbilledOf(stored, attempts, code === 'image_storage_unavailable', losses)) => {
      const latencyMs = elapsedMs(clock, started);
      const canceled = signal.reason instanceof LeaseLost && signal.reason.canceled;
      // A client that went away keeps what it had sent upstream, like a cancel (charges.ts).
      const disconnected = signal.aborted && signal.reason instanceof ClientDisconnected;
      const chargedCredits = disconnected ? creditsOf(imagesOfCalls(stored, journal?.sent ?? []), row) : 0;
      try {
        const hooked = await writes.run(async (trx) => {
          if (!attemptsWritten) await insertAttempts(trx, attempts);
          const settled = await failGeneration(trx, row, {
            errorCode: canceled || disconnected ? 'canceled' : code,
            errorMessage: disconnected
              ? `The client disconnected before the answer; ${chargedCredits > 0 ? `${chargedCredits} credits were charged for the upstream calls already sent` : 'nothing was charged'}.`
              : messageOf(error),
            latencyMs,
            completedAt: clock.now(),
            ...(canceled || disconnected ? { status: 'canceled' as const, chargedCredits } : unbilled ? { unbilled } : {}),
          });
          if (settled && !(canceled || disconnected) && unbilled) metrics.unbilledImages.inc({ reason: unbilled.reason }, unbilled.images);
          // Canceled elsewhere before this synchronous run sent all it would: the cancel charged every image.
          if (!settled && canceled && !stored.mark_sends) await refundUnsentCalls(trx, row, creditsOf(imagesOfCalls(stored, journal?.sent ?? []), row));
          return settled && (await this.deps.completionWebhooks?.emit(trx, row.id)) === true;
        });
        attemptsWritten = true;
        if (hooked) this.deps.completionWebhooks?.poke();
        return disconnected ? new ClientDisconnected({ generationId: row.id, chargedCredits }) : undefined;
      } catch (settleError) {
        // The row stays active: released by a retry when the database is back, or by a takeover.
        this.deps.logger.error({ err: settleError, generation_id: row.id }, 'could not settle a failed generation');
        this.deps.onUnsettled?.(row.id, code);
        return undefined;
      }
    };
    const tasks = row.runs > 1 ? await listGenerationTasks(db, row.id) : [];
    // The local provider sends nothing upstream: a takeover simply runs it again.
    const journal = sendsNothingUpstream(entry)
      ? undefined
      : new GenerationTaskJournal(writes, clock, this.deps.logger, row.id, tasks, stored.mark_sends, this.deps.owner, taskLifeOf(entry));
    if (row.runs > 1 && interrupted(stored, tasks)) {
      const error = new ApiError('provider_error', 'The generation was interrupted while an upstream call was in flight; it is not sent again, so it was not charged.');
      const lost = imagesOfCalls(stored, unacknowledgedCalls(stored, tasks));
      await settleFailure(error, 'abandoned', lost > 0 ? { images: lost, reason: 'abandoned' } : undefined);
      throw error;
    }
    if (journal && journal.expired.length > 0) {
      // The upstream no longer keeps the task (descriptor resume.lifeMs): polling it would only find
      // it gone. Its accepted tasks were billed and are never delivered: the operator's loss.
      const [first] = journal.expired;
      const error = new TaskExpired(first!, tasks.find((task) => Number(task.image_index) === first)?.task_id ?? 'unknown', taskLifeOf(entry)!);
      await settleFailure(error, error.code, unbilledOf(stored, [], false, { expiredCalls: [...journal.sent] }));
      throw error;
    }
    try {
      // Read back by id on every run: a takeover sends exactly the inputs the request gave.
      const providerRequest = stored.inputs ? { ...request, ...(await this.deps.inputs.resolve(stored.inputs)) } : request;
      const run = await channels.generate(row.id, entry, providerRequest, signal, journal);
      attempts = run.attempts;
      losses = run.losses;
      if (!run.ok) throw run.error;
      // Stored before success is recorded: an image the client cannot get is never charged.
      const images = await this.deps.images.persist(
        { generationId: row.id, owner: imageOwnerOf(row), provider: entry.provider, images: run.images, responseFormat: request.responseFormat, keepBase64: stored.keep_base64 },
        signal,
      );
      const latencyMs = elapsedMs(clock, started);
      let hooked = false;
      const outcome = { status: 'succeeded', errorCode: null, latencyMs, completedAt: clock.now() } as const;
      // Without a completion webhook (most requests) there is no event to write: one statement on PostgreSQL.
      let settled: boolean;
      try {
        settled =
          stored.webhook === undefined
            ? await this.settle({ id: row.id, outcome, attempts })
            : await writes.run(async (trx) => {
                await insertAttempts(trx, attempts);
                const done = await completeGeneration(trx, row.id, outcome);
                hooked = done && (await this.deps.completionWebhooks?.emit(trx, row.id)) === true;
                return done;
              });
      } catch (error) {
        // A settlement sent but not answered may still commit (and charge) when a hung database resumes.
        throw row.key_id !== null && mayHaveCommitted(error) ? withChargeOutcome(error, { kind: 'unknown', generationId: row.id }) : error;
      }
      attemptsWritten = true;
      if (hooked) this.deps.completionWebhooks?.poke();
      if (!settled) {
        // Canceled (on any replica), or failed by the sweeper, before it finished: the state it was
        // settled in stands, and no image leaves the gateway. A cancel charged the calls it found sent;
        // what else the upstream made is the operator's loss.
        this.deps.logger.warn({ generation_id: row.id }, 'generation finished after it had been settled elsewhere');
        await this.withdraw(row.id, stored, attempts, losses);
        throw signal.aborted ? signal.reason : new LeaseLost(row.id, true);
      }
      const billedUndelivered = unbilledOfDelivered(losses);
      if (billedUndelivered) await this.recordLoss(row.id, billedUndelivered);
      if (row.key_id !== null) metrics.creditsCharged.inc({ model: entry.model }, row.credits);
      metrics.generationSeconds.observe({ provider: entry.provider, outcome: 'succeeded' }, latencyMs / 1000);
      return { id: row.id, created: Math.floor(row.created_at / 1000), entry, images };
    } catch (error) {
      if (error instanceof LeaseLost) {
        // Canceled elsewhere before this synchronous run sent all it would: the cancel charged every image.
        if (error.canceled && !stored.mark_sends && journal) {
          const sent = creditsOf(imagesOfCalls(stored, journal.sent), row);
          await writes.run((trx) => refundUnsentCalls(trx, row, sent)).catch((refundError: unknown) => this.deps.logger.error({ err: refundError, generation_id: row.id }, 'could not refund the unsent calls of a canceled generation'));
        }
        throw error;
      }
      // Queued work (mark_sends: submitted asynchronously, run only by workers) that met an outage
      // before any channel attempt, so before any upstream call: run again later, not failed.
      if (stored.mark_sends && attempts.length === 0 && !signal.aborted && dependencyApiError(error)) throw new RunDeferred(row.id, error);
      metrics.generationSeconds.observe({ provider: entry.provider, outcome: 'failed' }, elapsedMs(clock, started) / 1000);
      if (isDatabaseOutage(error)) {
        // The database already cost this request its wait: the answer does not wait for the release
        // too (it releases, whenever it lands, or is retried by onUnsettled; it never charges).
        attemptsInBackground = true;
        // What the failed generation records is the plain outage: if this failure lands, nothing was charged.
        const recorded = error instanceof DependencyUnavailableError && error.outcome ? new DependencyUnavailableError(error.dependency, error.cause) : error;
        void settleFailure(recorded).then(() => (attemptsWritten ? undefined : this.recordAttempts(row.id, attempts)));
      } else {
        // A client that went away is told nothing; the error handler logs what its generation was charged.
        throw (await settleFailure(error)) ?? error;
      }
      throw error;
    } finally {
      // Not settled here (the lease was lost, or settling failed): the attempts still go in.
      if (!attemptsWritten && !attemptsInBackground) await this.recordAttempts(row.id, attempts);
    }
  }

  /** Attempt rows no settlement wrote, in a transaction of their own; a failure is logged, never thrown. */
  private async recordAttempts(generationId: string, rows: GenerationAttemptsTable[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      await this.deps.writes.run((trx) => insertAttempts(trx, rows));
    } catch (error) {
      this.deps.logger.error({ err: error, generation_id: generationId }, 'could not record generation attempts');
    }
  }

  /** The loss of a succeeded generation (charges.ts), after its settlement; a failure is logged, never thrown. */
  private async recordLoss(id: string, unbilled: Unbilled): Promise<void> {
    try {
      await this.deps.writes.run((trx) => recordUnbilled(trx, id, unbilled));
      this.deps.metrics.unbilledImages.inc({ reason: unbilled.reason }, unbilled.images);
    } catch (error) {
      this.deps.logger.error({ err: error, generation_id: id, unbilled }, 'could not record the operator\'s loss of a succeeded generation');
    }
  }

  /** A finished run whose generation had been settled elsewhere: its stored images go, and a loss the settlement did not charge is listed. */
  private async withdraw(id: string, stored: StoredGenerationRequest, attempts: readonly GenerationAttemptsTable[], losses: UpstreamLosses): Promise<void> {
    const { writes, clock, metrics, logger } = this.deps;
    try {
      await this.deps.images.withdraw(id);
      const ended = await findGeneration(this.deps.db, id);
      const made = unbilledOf(stored, attempts, false, losses);
      if (ended && ended.status !== 'canceled' && made) {
        const unbilled = { images: made.images, reason: 'settled_elsewhere' } as const;
        await writes.run((trx) => recordUnbilled(trx, id, unbilled));
        metrics.unbilledImages.inc({ reason: unbilled.reason }, unbilled.images);
      }
    } catch (error) {
      logger.error({ err: error, generation_id: id, at: clock.now() }, 'could not withdraw the images of a generation settled elsewhere');
    }
  }
}

/** latency_ms is a 32-bit integer column: a clock that steps (NTP, a test clock) must not make settlement fail. */
function elapsedMs(clock: Clock, started: number): number {
  return Math.min(Math.max(clock.now() - started, 0), 2_147_483_647);
}

/** What a failed generation records: the client's error for an ApiError or a dependency outage, else internal_error. */
function apiErrorOf(error: unknown): ApiError | undefined {
  return error instanceof ApiError ? error : dependencyApiError(error);
}

function errorCodeOf(error: unknown): string {
  return apiErrorOf(error)?.code ?? 'internal_error';
}

/**
 * Whether a takeover finds an upstream call it can neither resume nor safely send again: one
 * marked sent without a task id, or (runs that do not mark their sends) any call without a task
 * id, since it may have been sent. The local provider sends nothing upstream.
 */
function interrupted(stored: StoredGenerationRequest, tasks: GenerationTasksTable[]): boolean {
  return !sendsNothingUpstream(stored.entry) && unacknowledgedCalls(stored, tasks).length > 0;
}

/** The calls a predecessor marked sent but never saw accepted: neither resumable nor safe to send again. */
function unacknowledgedCalls(stored: StoredGenerationRequest, tasks: GenerationTasksTable[]): number[] {
  const byIndex = new Map(tasks.map((task) => [task.image_index, task]));
  return Array.from({ length: callsOf(stored) }, (_, i) => i).filter((i) => {
    const task = byIndex.get(i);
    return stored.mark_sends ? task !== undefined && task.task_id === null : task?.task_id == null;
  });
}

function messageOf(error: unknown): string {
  return (apiErrorOf(error)?.message ?? 'The gateway failed unexpectedly while generating.').slice(0, 1000);
}
