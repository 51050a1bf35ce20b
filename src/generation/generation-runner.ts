import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { TaskExpired, type UpstreamLosses } from '../channels/channel-failover';
import type { ChannelRouter } from '../channels/channel-router';
import { mayHaveCommitted } from '../db/bounded-pool';
import type { Database, GenerationAttemptsTable, GenerationTasksTable, GenerationsTable } from '../db/schema';
import { databaseBatchOptions, StatementBatcher } from '../db/statement-batcher';
import { capabilitiesOf } from '../db/storage-capabilities';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import { dependencyApiError, DependencyUnavailableError, isDatabaseOutage, withChargeOutcome } from '../errors/dependency-errors';
import { ClientDisconnected } from '../http/abort-on-disconnect';
import type { ImagesService } from '../images/images.service';
import type { InputImages } from '../images/inputs/input-images';
import type { GatewayMetrics } from '../metrics/metrics';
import type { Clock } from '../shared/clock';
import { creditsOf, deliveredCharge, heldFor, imagesOfCalls, unbilledOf } from './charges';
import { deliveredCostUsd } from '../usage/upstream-cost';
import type { CompletionWebhooks } from './completion-webhooks';
import { sendsNothingUpstream, taskLifeOf } from '../providers/formats';
import { GenerationTaskJournal, type StoredGenerationRequest, chainOf, interrupted, onModel, storedRequestOf, unacknowledgedCalls } from './durable';
import { listGenerationTasks, recordFallback } from './durable.repository';
import { insertAttempts, nextAttemptSeq } from './attempts.repository';
import { LeaseLost } from './lease';
import { findGeneration } from './generations.repository';
import {
  completeGeneration,
  failGeneration,
  recordUnbilled,
  refundUnsentCalls,
  type Settlement,
  settleDelivered,
  settleGeneration,
  settleGenerations,
  type Unbilled,
} from './settlement.repository';
import type { GenerationOutcome } from './generation-outcome';
import { imageOwnerOf, withdrawOtherOutputs } from '../images/images.repository';
import type { CatalogModel } from '../config/catalog';
import type { ProviderImage } from '../providers/provider';
import { logGenerationFailure } from './failure-log';
import { traceAttempts } from './generation-spans';
import { tracingEnabled, withSpan } from '../telemetry/tracing';

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
   * takes writes; `mayAppear`: its reservation may still commit, so a row not there yet is looked for again;
   * `unbilled`: what the upstream made for it, booked with the release (images made just before an outage).
   */
  onUnsettled?: (generationId: string, errorCode: string, mayAppear?: boolean, unbilled?: Unbilled) => void;
  /** PostgreSQL: the longest one database operation may take; a batched statement's queue counts in it. */
  databaseBudgetMs?: number;
}

/**
 * A background run that met a dependency outage (Redis, the database) before any upstream call: not
 * failed; its lease lapses and the queue runs it again once its channels have room (the worker's
 * room check asks the same stores, so nothing is claimed while they fail). The lapse is the backoff.
 */
export class RunDeferred extends Error {
  constructor(
    readonly generationId: string,
    override readonly cause: unknown,
  ) {
    super(`generation ${generationId} deferred: a dependency is unavailable`);
    this.name = 'RunDeferred';
  }
}

/** What a run holds from its start to its settlement. */
interface Run {
  row: GenerationsTable;
  stored: StoredGenerationRequest;
  /** The run's abort: its client's disconnect, or its lease's end. */
  signal: AbortSignal;
  started: number;
  /** The upstream calls it sent or resumes; none for a chain that sends nothing upstream. */
  journal: GenerationTaskJournal | undefined;
  /** Where its attempt rows are numbered from: 0, or after the rows of a takeover's predecessors. */
  firstSeq: number;
}

/** Where the channel phase stopped: the model it was on (the stored request as that model takes it) and what it had made. */
interface Progress {
  stage: StoredGenerationRequest;
  attempts: GenerationAttemptsTable[];
  /** What the upstream billed beyond the attempts' record (billed but undelivered images, expired tasks): charges.ts books it. */
  losses: UpstreamLosses;
  /** Whether the attempts are in the database already (a settlement wrote them before the run was found settled elsewhere). */
  attemptsWritten: boolean;
  /** The upstream made every image asked for: a failure after it (storing them, settling) leaves them made and not stored. */
  imagesMade?: boolean;
}

/** What the channel phase came to; settle() has one settlement per kind. */
type RunOutcome =
  /** Images made and stored (`imageIds`, their rows): charged the price of `entry`, the model that delivered. */
  | ({ kind: 'produced'; entry: CatalogModel; images: ProviderImage[]; imageIds: readonly string[] } & Progress)
  /** A takeover that may not run at all: a call it can neither resume nor send again, or a task the upstream no longer keeps. */
  | ({ kind: 'unresumable'; error: ApiError; code: string; unbilled: Unbilled | undefined } & Progress)
  /** Canceled or taken over (on any replica) while it ran: it delivers nothing. */
  | ({ kind: 'leaseLost'; error: LeaseLost } & Progress)
  /** Queued work that met an outage before any upstream call: run again later. */
  | { kind: 'deferred'; error: unknown }
  | ({ kind: 'failed'; error: unknown } & Progress);

const noLosses: UpstreamLosses = { billedUndelivered: 0, expiredCalls: [] };

/**
 * Runs a claimed generation through its channels to exactly one settlement: the synchronous path
 * (its client waiting) and the worker's background runs alike.
 */
export class GenerationRunner {
  /** Settles a succeeded generation without a completion webhook (most of them): batched on PostgreSQL. */
  private readonly settleBatched: (settlement: Settlement) => Promise<boolean>;

  constructor(private readonly deps: GenerationRunnerDeps) {
    const alone = (settlement: Settlement) => deps.writes.single((db) => settleGeneration(db, settlement.id, settlement.outcome, settlement.attempts));
    if (capabilitiesOf(deps.db).oneStatementWrites) {
      // PostgreSQL: concurrent requests' settlements share one statement (SQLite's group commit batches them already).
      const batcher = new StatementBatcher<Settlement, boolean>((settlements) => settleGenerations(deps.db, settlements), alone, {
        maxBatch: 100,
        lanes: 2,
        ...databaseBatchOptions(deps.databaseBudgetMs),
      });
      this.settleBatched = (settlement) => batcher.submit(settlement);
    } else {
      this.settleBatched = alone;
    }
  }

  /**
   * Runs a claimed generation and settles it exactly once: stored images and success (charged),
   * or failure/cancel (credits released). A takeover finds the upstream calls its predecessor sent:
   * an accepted visual task is polled again; a call sent but never acknowledged with a task id
   * (any Ark/images-API call, or a visual submit cut before its answer) cannot be resumed, and
   * sending it again could make the account pay twice, so the generation fails as `abandoned`.
   * `stored`: the row's request as this process wrote it (the synchronous path), not parsed back.
   * With fallbacks, the run continues on the next model of the request's chain while the provider
   * fails (src/channels/model-fallbacks.ts), a takeover on the model its predecessor had moved to,
   * and the success is charged the price of the model that delivered (charges.ts).
   */
  async execute(row: GenerationsTable, signal: AbortSignal, stored: StoredGenerationRequest = storedRequestOf(row)): Promise<GenerationOutcome> {
    const { clock, db, writes, logger, owner } = this.deps;
    const chain = chainOf(stored);
    // The row names the model the run moved to (recordFallback): a takeover continues there.
    const startAt = Math.max(
      0,
      chain.findIndex((candidate) => candidate.model === row.model),
    );
    const started = clock.now();
    const tasks = row.runs > 1 ? await listGenerationTasks(db, row.id) : [];
    const firstSeq = row.runs > 1 ? await nextAttemptSeq(db, row.id) : 0;
    const first = onModel(stored, (chain[startAt] as CatalogModel).model);
    // The local provider sends nothing upstream: a takeover simply runs it again.
    const journal = chain.every(sendsNothingUpstream)
      ? undefined
      : new GenerationTaskJournal(db, writes, clock, logger, row.id, tasks, stored.mark_sends, owner, taskLifeOf(first.entry));
    const run: Run = { row, stored, signal, started, journal, firstSeq };
    if (!tracingEnabled()) return this.settle(run, await this.run(run, chain.slice(startAt), first, tasks));
    // A background run starts a trace of its own, linked to the request that queued it.
    const ids = { 'gateway.generation.id': row.id, ...(row.key_id !== null ? { 'gateway.key.id': row.key_id } : {}) };
    return withSpan(
      stored.mark_sends ? 'generation background run' : 'generation execute',
      ids,
      async () => {
        const outcome = await this.run(run, chain.slice(startAt), first, tasks);
        return withSpan('generation settle', { ...ids, 'gateway.outcome': outcome.kind }, () => this.settle(run, outcome));
      },
      stored.mark_sends ? { root: true, ...(stored.origin?.traceparent ? { linkTo: stored.origin.traceparent } : {}) } : {},
    );
  }

  /** The channel phase: the upstream calls on the chain's models from `first` on, and the images stored. It settles nothing. */
  private async run(run: Run, chain: CatalogModel[], first: StoredGenerationRequest, tasks: GenerationTasksTable[]): Promise<RunOutcome> {
    const { row, stored, signal, journal } = run;
    const { writes, clock, db, owner } = this.deps;
    const none = { stage: first, attempts: [], losses: noLosses, attemptsWritten: false };
    if (row.runs > 1 && interrupted(first, tasks)) {
      const error = new ApiError(
        'provider_error',
        'The generation was interrupted while an upstream call was in flight; it is not sent again, so it was not charged.',
      );
      // Its accepted tasks are not polled either: the upstream makes and bills them as it does the unacknowledged calls.
      const sent = [...unacknowledgedCalls(first, tasks), ...tasks.filter((task) => task.task_id !== null).map((task) => Number(task.image_index))];
      const lost = imagesOfCalls(first, sent);
      return {
        kind: 'unresumable',
        ...none,
        attempts: predecessorAttempts(run, first, tasks, sent, 'abandoned'),
        error,
        code: 'abandoned',
        unbilled: lost > 0 ? { images: lost, reason: 'abandoned' } : undefined,
      };
    }
    if (journal && journal.expired.length > 0) {
      // The upstream no longer keeps the task (descriptor resume.lifeMs): polling it would only find
      // it gone. Its accepted tasks were billed and are never delivered: the operator's loss.
      const [expired] = journal.expired;
      const error = new TaskExpired(expired!, tasks.find((task) => Number(task.image_index) === expired)?.task_id ?? 'unknown', taskLifeOf(first.entry)!);
      return {
        kind: 'unresumable',
        ...none,
        attempts: predecessorAttempts(run, first, tasks, journal.expired, error.code),
        error,
        code: error.code,
        unbilled: unbilledOf(first, [], false, { expiredCalls: [...journal.sent] }),
      };
    }
    // Moves with the run's fallbacks: the model whose calls, charges and losses count.
    let stage = first;
    let attempts: GenerationAttemptsTable[] = [];
    let losses = noLosses;
    let imagesMade = false;
    try {
      // Read back by id on every run: a takeover sends exactly the inputs the request gave.
      const inputs = stored.inputs ? await this.deps.inputs.resolve(stored.inputs) : {};
      const stages = chain.map((entry) => ({ entry, request: { ...onModel(stored, entry.model).request, ...inputs } }));
      const onFallback = async (next: CatalogModel) => {
        if (!(await writes.run((trx) => recordFallback(trx, row.id, owner, next, clock.now())))) {
          throw new LeaseLost(row.id, (await findGeneration(db, row.id))?.status === 'canceled');
        }
        journal?.restart();
        stage = onModel(stored, next.model);
      };
      const result = await this.deps.channels.generate(row.id, stages, signal, journal, onFallback);
      if (tracingEnabled()) traceAttempts(result.attempts, chain, result.ok ? undefined : result.error);
      ({ losses } = result);
      attempts = run.firstSeq === 0 ? result.attempts : result.attempts.map((attempt) => ({ ...attempt, seq: attempt.seq + run.firstSeq }));
      if (!result.ok) return stopOf(run, result.error, { stage, attempts, losses, attemptsWritten: false });
      imagesMade = true;
      // Stored before success is recorded: an image the client cannot get is never charged.
      let imageIds: string[] = [];
      const persist = () =>
        this.deps.images.persist(
          {
            generationId: row.id,
            owner: imageOwnerOf(row),
            provider: result.entry.provider,
            images: result.images,
            responseFormat: stored.request.responseFormat,
            keepBase64: stored.keep_base64,
            onStored: (ids) => {
              imageIds = ids;
            },
          },
          signal,
        );
      const images = tracingEnabled() ? await withSpan('generation store images', { 'gateway.images': result.images.length }, persist) : await persist();
      return { kind: 'produced', entry: result.entry, images, imageIds, stage, attempts, losses, attemptsWritten: false, imagesMade };
    } catch (error) {
      return stopOf(run, error, { stage, attempts, losses, attemptsWritten: false, imagesMade });
    }
  }

  /** The run's one settlement, by what its channel phase came to; it returns only a delivered generation. */
  private async settle(run: Run, outcome: RunOutcome): Promise<GenerationOutcome> {
    switch (outcome.kind) {
      case 'produced':
        return this.settleProduced(run, outcome);
      case 'unresumable':
        return this.settleUnresumable(run, outcome);
      case 'leaseLost':
        return this.settleLeaseLost(run, outcome);
      case 'deferred':
        throw new RunDeferred(run.row.id, outcome.error);
      case 'failed':
        return this.settleFailed(run, outcome);
    }
  }

  /** Charged the price of the model that delivered, its attempts and usage written with the settlement; a generation settled elsewhere meanwhile delivers nothing. */
  private async settleProduced(run: Run, produced: Extract<RunOutcome, { kind: 'produced' }>): Promise<GenerationOutcome> {
    const { row, stored, signal } = run;
    const { clock, metrics, writes, completionWebhooks } = this.deps;
    const { entry, stage, attempts, losses } = produced;
    const latencyMs = elapsedMs(clock, run.started);
    // What was delivered, priced on the model that delivered it, within what that model holds of the reservation.
    const { credits, overrun } = deliveredCharge(stage, heldFor(stage, row), produced.images);
    // The operator's loss: what the upstream billed beyond what it delivered, and what calls of the models
    // before it that a timeout cut may have made (those models delivered nothing, or it would not have fallen back).
    const loss = unbilledOf(
      stored,
      attempts.filter((attempt) => attempt.model !== entry.model),
      false,
      { billedUndelivered: losses.billedUndelivered },
    );
    const upstreamCostUsd = deliveredCostUsd(stage, produced.images, loss?.images);
    const outcome = { status: 'succeeded', errorCode: null, latencyMs, completedAt: clock.now(), upstreamCostUsd } as const;
    const delivered =
      credits === row.credits && entry.model === stored.entry.model
        ? undefined
        : { model: entry.model, provider: entry.provider, requestedModel: stored.entry.model, credits, unbilled: loss };
    let settled: boolean;
    let hooked = false;
    try {
      // Without a completion webhook, a new price or a predecessor (most requests) there is nothing else to write: one statement on PostgreSQL.
      settled =
        stored.webhook === undefined && delivered === undefined && row.runs === 1
          ? await this.settleBatched({ id: row.id, outcome, attempts })
          : await writes.run(async (trx) => {
              let done: boolean;
              if (delivered) {
                done = await settleDelivered(trx, row, delivered, outcome, attempts);
              } else {
                await insertAttempts(trx, attempts);
                done = await completeGeneration(trx, row.id, outcome);
              }
              // A takeover's result is its own images: what an earlier run stored before it died is withdrawn with the settlement.
              if (done && row.runs > 1) await withdrawOtherOutputs(trx, row.id, produced.imageIds, outcome.completedAt);
              hooked = done && (await completionWebhooks?.emit(trx, row.id)) === true;
              return done;
            });
    } catch (error) {
      // A settlement sent but not answered may still commit (and charge) when a hung database resumes.
      const failed = row.key_id !== null && mayHaveCommitted(error) ? withChargeOutcome(error, { kind: 'unknown', generationId: row.id }) : error;
      return this.settle(run, stopOf(run, failed, produced));
    }
    if (hooked) completionWebhooks?.poke();
    if (!settled) {
      // Canceled (on any replica), or failed by the sweeper, before it finished: the state it was
      // settled in stands, and no image leaves the gateway. A cancel charged the calls it found sent;
      // what else the upstream made is the operator's loss.
      this.deps.logger.warn({ generation_id: row.id }, 'generation finished after it had been settled elsewhere');
      await this.withdraw(row.id, produced.imageIds, stored, attempts, losses);
      return this.settle(run, stopOf(run, signal.aborted ? signal.reason : new LeaseLost(row.id, true), { ...produced, attemptsWritten: true }));
    }
    // Recorded with the settlement when it re-priced, else after it.
    if (loss && delivered) metrics.unbilledImages.inc({ reason: loss.reason }, loss.images);
    else if (loss) await this.recordLoss(row.id, loss);
    if (row.key_id !== null) metrics.creditsCharged.inc({ model: entry.model }, credits);
    if (overrun > 0) {
      metrics.unbilledCredits.inc({ model: entry.model, reason: 'over_reservation' }, overrun);
      this.deps.logger.warn(
        { generation_id: row.id, model: entry.model, credits, overrun },
        'delivered more than the reservation covers: the difference is unbilled',
      );
    }
    metrics.generationSeconds.observe({ provider: entry.provider, outcome: 'succeeded' }, latencyMs / 1000);
    return { id: row.id, created: Math.floor(row.created_at / 1000), entry, requestedModel: stored.entry.model, images: produced.images, credits };
  }

  private async settleUnresumable(run: Run, unresumable: Extract<RunOutcome, { kind: 'unresumable' }>): Promise<never> {
    const written = await this.writeFailure(run, unresumable, unresumable.error, unresumable.code, unresumable.unbilled);
    throw endedElsewhereError(run, written) ?? unresumable.error;
  }

  /** Settled elsewhere: nothing to settle here; a synchronous run's unsent calls go back to its key, its attempts still go in. */
  private async settleLeaseLost(run: Run, lost: Extract<RunOutcome, { kind: 'leaseLost' }>): Promise<never> {
    const { row, stored, journal } = run;
    // Canceled elsewhere before this synchronous run sent all it would: the cancel charged every image.
    if (lost.error.canceled && !stored.mark_sends && journal) {
      const sent = creditsOf(imagesOfCalls(lost.stage, journal.sent), heldFor(lost.stage, row));
      await this.deps.writes
        .run((trx) => refundUnsentCalls(trx, row, sent))
        .catch((refundError: unknown) =>
          this.deps.logger.error({ err: refundError, generation_id: row.id }, 'could not refund the unsent calls of a canceled generation'),
        );
    }
    if (!lost.attemptsWritten) await this.recordAttempts(row.id, lost.attempts);
    throw lost.error;
  }

  private async settleFailed(run: Run, failed: Extract<RunOutcome, { kind: 'failed' }>): Promise<never> {
    const { error, stage } = failed;
    this.deps.metrics.generationSeconds.observe({ provider: stage.entry.provider, outcome: 'failed' }, elapsedMs(this.deps.clock, run.started) / 1000);
    if (isDatabaseOutage(error)) {
      // The database already cost this request its wait: the answer does not wait for the release
      // too (it releases, whenever it lands, or is retried by onUnsettled; it never charges).
      // What the failed generation records is the plain outage: if this failure lands, nothing was charged.
      const recorded = error instanceof DependencyUnavailableError && error.outcome ? new DependencyUnavailableError(error.dependency, error.cause) : error;
      void this.writeFailure(run, failed, recorded, ...failureOf(run, failed, recorded));
      throw error;
    }
    // A client that went away is told nothing; the error handler logs what its generation was charged.
    const written = await this.writeFailure(run, failed, error, ...failureOf(run, failed, error));
    throw written.disconnected ?? endedElsewhereError(run, written) ?? error;
  }

  /**
   * Fails (or, canceled or disconnected, cancels) the generation, releasing what it did not charge, with
   * its attempts and completion webhook in the same transaction. Never throws: a settlement that fails
   * leaves the row active for onUnsettled or a takeover, and its attempts go in alone.
   * Returns the refusal of a client that disconnected, and how the row had ended when another
   * settlement came first (a cancel on any replica, the sweeper): the run's own error is then not
   * what its client is told, since the books say otherwise.
   */
  private async writeFailure(run: Run, progress: Progress, error: unknown, code: string, unbilled: Unbilled | undefined): Promise<FailureWritten> {
    const { row, stored, signal, journal } = run;
    const { stage, attempts } = progress;
    const { clock, metrics, writes, completionWebhooks } = this.deps;
    const latencyMs = elapsedMs(clock, run.started);
    const canceled = signal.reason instanceof LeaseLost && signal.reason.canceled;
    // A client that went away keeps what it had sent upstream, like a cancel (charges.ts).
    const disconnected = signal.aborted && signal.reason instanceof ClientDisconnected;
    const chargedCredits = disconnected ? creditsOf(imagesOfCalls(stage, journal?.sent ?? []), heldFor(stage, row)) : 0;
    if (!canceled && !disconnected) {
      logGenerationFailure(
        this.deps.logger,
        {
          request_id: stored.origin?.request_id,
          generation_id: row.id,
          key_id: row.key_id,
          project_id: row.project_id ?? null,
          model: stage.entry.model,
          provider: stage.entry.provider,
          channel_id: attempts.at(-1)?.channel_id,
          error_code: code,
        },
        error,
        'generation failed',
      );
    }
    let endedElsewhere: FailureWritten['endedElsewhere'];
    try {
      const hooked = await writes.run(async (trx) => {
        if (!progress.attemptsWritten) await insertAttempts(trx, attempts);
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
        // What an earlier run of a taken-over generation stored is no result of it.
        if (settled && row.runs > 1) await withdrawOtherOutputs(trx, row.id, [], clock.now());
        if (!settled) {
          endedElsewhere = (await findGeneration(trx, row.id))?.status === 'canceled' ? 'canceled' : 'settled';
          // Canceled elsewhere before this synchronous run sent all it would: the cancel charged every image.
          if (endedElsewhere === 'canceled' && !stored.mark_sends)
            await refundUnsentCalls(trx, row, creditsOf(imagesOfCalls(stage, journal?.sent ?? []), heldFor(stage, row)));
        }
        return settled && (await completionWebhooks?.emit(trx, row.id)) === true;
      });
      if (hooked) completionWebhooks?.poke();
      return {
        ...(disconnected ? { disconnected: new ClientDisconnected({ generationId: row.id, chargedCredits }) } : {}),
        ...(endedElsewhere ? { endedElsewhere } : {}),
      };
    } catch (settleError) {
      // The row stays active: released by a retry when the database is back, or by a takeover.
      this.deps.logger.error({ err: settleError, generation_id: row.id }, 'could not settle a failed generation');
      this.deps.onUnsettled?.(row.id, code, false, canceled || disconnected ? undefined : unbilled);
      if (!progress.attemptsWritten) await this.recordAttempts(row.id, attempts);
      return {};
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
      this.deps.logger.error({ err: error, generation_id: id, unbilled }, "could not record the operator's loss of a succeeded generation");
    }
  }

  /**
   * A finished run whose generation had been settled elsewhere: its stored images go (its own only:
   * another run of the generation may have delivered), and a loss the settlement did not charge is listed.
   */
  private async withdraw(
    id: string,
    imageIds: readonly string[],
    stored: StoredGenerationRequest,
    attempts: readonly GenerationAttemptsTable[],
    losses: UpstreamLosses,
  ): Promise<void> {
    const { writes, clock, metrics, logger } = this.deps;
    try {
      await this.deps.images.withdraw(id, imageIds);
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

/**
 * The calls a takeover's predecessor sent and nobody will finish (its process died; they are neither
 * resumed nor sent again): listed as the generation's attempts, failed with `errorCode`, numbered
 * before the run's own. Only calls the journal names a channel for: a synchronous run marks none.
 */
function predecessorAttempts(
  run: Run,
  stage: StoredGenerationRequest,
  tasks: readonly GenerationTasksTable[],
  indexes: readonly number[],
  errorCode: string,
): GenerationAttemptsTable[] {
  const ended = tasks.filter((task) => indexes.includes(Number(task.image_index)));
  return ended.map((task, i) => ({
    generation_id: run.row.id,
    seq: run.firstSeq + i,
    image_index: Number(task.image_index),
    channel_id: task.channel_id,
    outcome: 'failed',
    error_code: errorCode,
    // How long the call took is unknown: its process died before it learnt.
    latency_ms: 0,
    started_at: Number(task.sent_at),
    model: stage.entry.model,
    upstream_usage: null,
  }));
}

/** What writing a failure came to: a client that disconnected, or a row another settlement had ended first. */
interface FailureWritten {
  disconnected?: ClientDisconnected;
  endedElsewhere?: 'canceled' | 'settled';
}

/**
 * A failed run whose generation was settled elsewhere first (canceled on any replica, or failed by
 * the sweeper): its client is told that (409 generation_finished, with what the books kept), not the
 * run's own error, whose answer would say the credits were released.
 */
function endedElsewhereError(run: Run, written: FailureWritten): LeaseLost | undefined {
  return written.endedElsewhere ? new LeaseLost(run.row.id, written.endedElsewhere === 'canceled') : undefined;
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

/** Where a run stopped short of a delivery: its lease lost, deferred, or failed. */
function stopOf(run: Run, error: unknown, { stage, attempts, losses, attemptsWritten, imagesMade }: Progress): RunOutcome {
  const progress = { stage, attempts, losses, attemptsWritten, imagesMade };
  if (error instanceof LeaseLost) return { kind: 'leaseLost', error, ...progress };
  // Queued work (mark_sends: submitted asynchronously, run only by workers) that met an outage
  // before any channel attempt, so before any upstream call: run again later, not failed.
  if (run.stored.mark_sends && attempts.length === 0 && !run.signal.aborted && dependencyApiError(error)) return { kind: 'deferred', error };
  return { kind: 'failed', error, ...progress };
}

/** What a failed generation records besides its message: its error's code, and what the upstream billed that it did not deliver. */
function failureOf(run: Run, { attempts, losses, imagesMade }: Progress, error: unknown): [code: string, unbilled: Unbilled | undefined] {
  const code = errorCodeOf(error);
  // Made and then lost to the image store or the database (storing them, settling): not stored.
  return [code, unbilledOf(run.stored, attempts, imagesMade === true || code === 'image_storage_unavailable', losses)];
}

function messageOf(error: unknown): string {
  return (apiErrorOf(error)?.message ?? 'The gateway failed unexpectedly while generating.').slice(0, 1000);
}
