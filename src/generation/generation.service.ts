import type { Logger } from 'pino';
import type { components } from '../../generated/gateway';
import type { CatalogModel } from '../config/catalog';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import { dependencyApiError, DependencyUnavailableError, isDatabaseUnavailable, withChargeOutcome } from '../errors/dependency-errors';
import { DatabaseDeadlineExceeded, mayHaveCommitted } from '../db/bounded-pool';
import type { ImagesService } from '../images/images.service';
import type { ConcurrencyLeases, HeldLease } from '../keys/concurrency-leases';
import { checkModelPermitted, holdConcurrencySlot } from '../keys/key-policy';
import type { ClientKey } from '../keys/key.model';
import { findKeyById, type Reservation, reserveCredits } from '../keys/keys.repository';
import { keyRefusal } from '../keys/rules/key-usability';
import { currentPeriodStart, periodEnd } from '../keys/rules/quota-period';
import type { GatewayMetrics } from '../metrics/metrics';
import type { ProviderImage } from '../providers/provider';
import type { ProviderRegistry } from '../providers/registry';
import { checkSize, upstreamModelSpec } from '../providers/upstream-models';
import type { ChannelRouter } from '../channels/channel-router';
import type { RateLimitDecision, RateLimiter } from '../ratelimit/rate-limiter';
import { type Clock, toIso } from '../shared/clock';
import { newSortableId } from '../shared/ids';
import { emitQuotaEvents, emitQuotaExhausted } from '../webhooks/key-events';
import type { Kysely } from 'kysely';
import type { Database, GenerationAttemptsTable, GenerationTasksTable, GenerationsTable } from '../db/schema';
import { insertAttempts } from '../channels/channels.repository';
import { ClientGenerations } from './client-generations';
import { CompletionWebhooks } from './completion-webhooks';
import type { WebhookSecrets } from '../webhooks/secret-sealing';
import { listGenerationTasks } from './durable.repository';
import { GenerationTaskJournal, type StoredGenerationRequest, callsOf } from './durable';
import { type GenerationWorker, LeaseLost, RunDeferred } from './generation-worker';
import {
  completeGeneration,
  countQueuedGenerations,
  failGeneration,
  findGeneration,
  insertGeneration,
  recordUnbilled,
  refundUnsentCalls,
  type ReservationRequest,
  reservesInOneStatement,
  reserveWithGeneration,
  reserveWithGenerations,
  type Settlement,
  settleGeneration,
  settleGenerations,
} from './generations.repository';
import { StatementBatcher } from '../db/statement-batcher';
import { ClientDisconnected } from '../http/abort-on-disconnect';
import { creditsOf, imagesOfCalls, unbilledOf } from './charges';

export type GenerateImageInput = components['schemas']['GenerateImageRequest'];
export type GenerateImageResult = components['schemas']['GenerateImageResponse'];

export interface GenerationDeps {
  writes: WriteTransactions;
  clock: Clock;
  catalog: ReadonlyMap<string, CatalogModel>;
  providers: ProviderRegistry;
  channels: ChannelRouter;
  rateLimiter: RateLimiter;
  metrics: GatewayMetrics;
  logger: Logger;
  /** Slots of the keys' max_concurrent. */
  leases?: ConcurrencyLeases;
  /**
   * Called when a failed generation could not be settled either, to release it once the database
   * takes writes; `mayAppear`: its reservation may still commit, so a row not there yet is looked for again.
   */
  onUnsettled?: (generationId: string, errorCode: string, mayAppear?: boolean) => void;
  /** PostgreSQL: the longest one database operation may take; a batched statement's queue counts in it. */
  databaseBudgetMs?: number;
  images: ImagesService;
  db: Kysely<Database>;
  /** This process's worker: runs the rows the sync path inserts already claimed by it. */
  worker: GenerationWorker;
  leaseMs: number;
  /** Asynchronous generations one key may have queued (MAX_QUEUED_GENERATIONS_PER_KEY). */
  maxQueuedPerKey: number;
  /** The worker's poll period: the Retry-After of a full queue. */
  pollMs: number;
  /** Completion webhooks (the request's `webhook`); without them such a request is refused. */
  webhooks?: { secrets: WebhookSecrets; allowPrivateNetworks: boolean; poke: () => void };
}

/** What a generation produced, before each API shapes it into its own response. */
export interface GenerationOutcome {
  id: string;
  created: number;
  entry: CatalogModel;
  images: ProviderImage[];
  credits: number;
}

export interface KeyGenerationOutcome extends GenerationOutcome {
  /** Credits left on the key in this period, after this charge. */
  creditsRemaining: number;
  /** The key's rate-limit state after counting this request (for the response headers). */
  rateLimit: RateLimitDecision;
}

/** What the gateway's and the internal API's generation responses share (all but `usage`). */
export function generationSummary(outcome: GenerationOutcome): Omit<GenerateImageResult, 'usage'> {
  return {
    id: outcome.id,
    created: outcome.created,
    model: outcome.entry.model,
    provider: outcome.entry.provider,
    data: outcome.images.map((image) => ({
      ...(image.url !== undefined ? { url: image.url } : {}),
      ...(image.b64Json !== undefined ? { b64_json: image.b64Json } : {}),
      width: image.width,
      height: image.height,
    })),
  };
}

/**
 * Generation with exact accounting. For a client key: model and provider checks, the key's RPM,
 * an atomic credit reservation, the provider call, then settlement or release. For an internal
 * service: no key, no quota, the usage row records the service. A refused request is never charged.
 */
export class GenerationService {
  /** The key holder's view of its generations (GET, list, cancel). */
  readonly clients: ClientGenerations;
  readonly completionWebhooks: CompletionWebhooks | undefined;
  /** Settles a succeeded generation without a completion webhook (most of them): batched on PostgreSQL. */
  private readonly settle: (settlement: Settlement) => Promise<boolean>;
  /** PostgreSQL: the one-statement reservation (reserveWithGeneration), batched over distinct keys. */
  private readonly reserveInOneStatement: ((request: ReservationRequest) => Promise<Reservation | undefined>) | undefined;
  /** For the webhook secret operation (read or created on first use). */
  get db(): Kysely<Database> {
    return this.deps.db;
  }

  constructor(private readonly deps: GenerationDeps) {
    const alone = (settlement: Settlement) => deps.writes.single((db) => settleGeneration(db, settlement.id, settlement.outcome, settlement.attempts));
    if (reservesInOneStatement(deps.db)) {
      // PostgreSQL: concurrent requests' settlements share one statement (SQLite's group commit batches them already).
      // A database that is down fails every item of a batch alike: no point sending each again.
      const retryAlone = (error: unknown) => !(error instanceof DependencyUnavailableError);
      // The wait for a lane counts in the operation's time, as the wait for a pooled connection does.
      const deadline =
        deps.databaseBudgetMs === undefined
          ? undefined
          : {
              ms: deps.databaseBudgetMs,
              timedOut: (sent: boolean) =>
                new DependencyUnavailableError('database', new DatabaseDeadlineExceeded(`no answer to a batched statement within ${deps.databaseBudgetMs} ms${sent ? '' : ' (not sent)'}`, sent)),
            };
      const batcher = new StatementBatcher<Settlement, boolean>((settlements) => settleGenerations(deps.db, settlements), alone, {
        maxBatch: 100,
        lanes: 2,
        retryAlone,
        ...(deadline ? { deadline } : {}),
      });
      this.settle = (settlement) => batcher.submit(settlement);
      const reservations = new StatementBatcher<ReservationRequest, Reservation | undefined>(
        (requests) => reserveWithGenerations(deps.db, requests),
        (request) => reserveWithGeneration(deps.db, request.reservation, request.row),
        // A key is in one batch in flight at most, so this process's lanes never wait on each other's key rows.
        { maxBatch: 100, lanes: 3, conflictKey: (request) => request.reservation.keyId, retryAlone, ...(deadline ? { deadline } : {}) },
      );
      this.reserveInOneStatement = (request) => reservations.submit(request);
    } else {
      this.settle = alone;
      this.reserveInOneStatement = undefined;
    }
    const hooks = deps.webhooks && new CompletionWebhooks({ clock: deps.clock, ...deps.webhooks, resource: (db, row) => this.clients.resource(row, db) });
    this.completionWebhooks = hooks;
    this.clients = new ClientGenerations({
      db: deps.db,
      writes: deps.writes,
      clock: deps.clock,
      images: deps.images,
      worker: deps.worker,
      ...(hooks ? { onSettled: (trx, id) => hooks.emit(trx, id), afterSettled: () => hooks.poke() } : {}),
    });
  }

  /** The request's completion webhook, checked; its key's signing secret exists before any delivery needs it. */
  private async webhookOf(key: ClientKey, input: GenerateImageInput) {
    if (input.webhook === undefined && input.webhook_events_filter === undefined) return undefined;
    if (!this.completionWebhooks) throw new ApiError('invalid_request', 'Completion webhooks are not available here.', { param: 'webhook' });
    const webhook = this.completionWebhooks.validate(input);
    if (webhook) await this.completionWebhooks.secretFor(this.deps.db, key.id);
    return webhook;
  }

  private modelFor(model: string, providerOverride?: string): CatalogModel {
    const { catalog, providers } = this.deps;
    const entry = catalog.get(model);
    if (providerOverride !== undefined) {
      if (!providers.get(providerOverride)) {
        throw new ApiError('invalid_request', `Unknown provider ${providerOverride}. Known providers: ${[...providers.names()].join(', ')}.`, {
          param: 'provider',
        });
      }
      if (entry && entry.provider !== providerOverride) {
        throw new ApiError('invalid_request', `Model ${model} is served by ${entry.provider}, not ${providerOverride}.`, { param: 'provider' });
      }
      // Trusted callers may address an upstream model the catalog does not list.
      if (!entry) {
        return {
          model,
          provider: providerOverride,
          upstream_model: model,
          credits_per_image: 0,
          default_size: '1024x1024',
          ...(providerOverride === 'jimeng' ? { transport: model.startsWith('jimeng_') ? 'visual' : 'ark' } : {}),
          ...(upstreamModelSpec(model)?.sizes ? { size_bounds: upstreamModelSpec(model)?.sizes } : {}),
        };
      }
    }
    if (!entry) {
      throw new ApiError('model_not_found', `Unknown model ${model}. Known models: ${[...catalog.keys()].join(', ')}.`, { param: 'model' });
    }
    return entry;
  }

  /** The key's model and provider checks, then its RPM: the same for every way a key submits work. */
  private async admitForKey(key: ClientKey, model: string): Promise<{ entry: CatalogModel; decision: RateLimitDecision }> {
    const entry = this.modelFor(model);
    checkModelPermitted(key, entry);
    return { entry, decision: await this.deps.rateLimiter.consume(key.id, key.rateLimitRpm, this.deps.clock.now()) };
  }

  /** The gateway's path: a client key pays, within its rate limit and quota. */
  async generateForKey(key: ClientKey, input: GenerateImageInput, signal: AbortSignal): Promise<KeyGenerationOutcome> {
    const { entry, decision } = await this.admitForKey(key, input.model);
    let slot: HeldLease | undefined;
    try {
      if (!decision.allowed) {
        this.deps.metrics.rateLimitRefusals.inc();
        throw new ApiError('rate_limited', `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s.`, {
          headers: { 'Retry-After': String(decision.resetSeconds) },
        });
      }
      const webhook = await this.webhookOf(key, input);
      slot = await holdConcurrencySlot(this.deps.leases, key);
      const n = input.n ?? 1;
      const reservation = await this.reserve(key, entry, n, { ...this.storedRequest(entry, input, false), ...(webhook ? { webhook } : {}) });
      const outcome = await this.runHeld(reservation.row, signal);
      return { ...outcome, credits: reservation.cost, creditsRemaining: reservation.creditsRemaining, rateLimit: decision };
    } catch (error) {
      // Refusals after the limiter still tell the client its rate-limit state.
      if (error instanceof ApiError) error.rateLimit ??= decision;
      throw error;
    } finally {
      await slot?.release();
    }
  }

  /**
   * The asynchronous path (`Prefer: respond-async`): the same checks and reservation at once (a
   * refusal is answered now with today's codes), plus a cap on the key's queued generations; the
   * generation is queued and a worker (this process's first: woken now) runs it when its model's
   * channels have room. The key's max_concurrent bounds synchronous requests only.
   */
  async submitForKey(key: ClientKey, input: GenerateImageInput): Promise<{ row: GenerationsTable; creditsRemaining: number; rateLimit: RateLimitDecision }> {
    const { entry, decision } = await this.admitForKey(key, input.model);
    try {
      if (!decision.allowed) {
        this.deps.metrics.rateLimitRefusals.inc();
        throw new ApiError('rate_limited', `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s.`, {
          headers: { 'Retry-After': String(decision.resetSeconds) },
        });
      }
      const queued = await countQueuedGenerations(this.deps.db, key.id);
      if (queued >= this.deps.maxQueuedPerKey) {
        throw new ApiError('too_many_queued_generations', `This key already has ${queued} generations queued; retry when some have started.`, {
          headers: { 'Retry-After': String(Math.max(1, Math.ceil(this.deps.pollMs / 1000))) },
        });
      }
      const webhook = await this.webhookOf(key, input);
      const reservation = await this.reserve(key, entry, input.n ?? 1, { ...this.storedRequest(entry, input, true), ...(webhook ? { webhook } : {}) }, false);
      this.deps.worker.wake();
      return { row: reservation.row, creditsRemaining: reservation.creditsRemaining, rateLimit: decision };
    } catch (error) {
      if (error instanceof ApiError) error.rateLimit ??= decision;
      throw error;
    }
  }

  /** The internal API's path: a trusted service, no key, no quota; recorded for its client id. */
  async generateForService(clientId: string, input: GenerateImageInput & { provider?: string }, signal: AbortSignal): Promise<GenerationOutcome> {
    if (input.webhook !== undefined || input.webhook_events_filter !== undefined) {
      throw new ApiError('invalid_request', 'Completion webhooks belong to client keys; the internal API has none.', { param: 'webhook' });
    }
    const entry = this.modelFor(input.model, input.provider);
    const { writes, clock } = this.deps;
    const now = clock.now();
    const credits = (input.n ?? 1) * entry.credits_per_image;
    const row: GenerationsTable = {
      ...this.heldRow(now),
      id: newSortableId('gen', now),
      key_id: null,
      client_id: clientId,
      model: entry.model,
      provider: entry.provider,
      images: input.n ?? 1,
      credits,
      period_started_at: now,
      created_at: now,
      usage_epoch: null,
      request: JSON.stringify(this.storedRequest(entry, input, false)),
    };
    await writes.run((trx) => insertGeneration(trx, row));
    const outcome = await this.runHeld(row, signal);
    return { ...outcome, credits };
  }

  /** What a worker needs to run the generation later, on any replica. */
  private storedRequest(entry: CatalogModel, input: GenerateImageInput, background: boolean): StoredGenerationRequest {
    const [width, height] = (input.size ?? entry.default_size).split('x').map(Number) as [number, number];
    // Refused here, before the reservation: a size the upstream would refuse is never charged nor sent.
    checkSize(entry.model, width, height, entry.size_bounds);
    return {
      entry,
      keep_base64: background,
      mark_sends: background,
      request: {
        prompt: input.prompt,
        ...(input.negative_prompt !== undefined ? { negativePrompt: input.negative_prompt } : {}),
        upstreamModel: entry.upstream_model,
        ...(entry.transport !== undefined ? { transport: entry.transport } : {}),
        ...(entry.upstream_options !== undefined ? { upstreamOptions: entry.upstream_options } : {}),
        n: input.n ?? 1,
        width,
        height,
        ...(input.seed !== undefined ? { seed: input.seed } : {}),
        responseFormat: input.response_format ?? 'url',
      },
    };
  }

  /**
   * The columns of a row this process runs at once (the synchronous path): inserted already
   * claimed by the local worker, so no other worker can take it while its lease is renewed.
   */
  private heldRow(now: number): Pick<
    GenerationsTable,
    'status' | 'error_code' | 'error_message' | 'latency_ms' | 'completed_at' | 'lease_owner' | 'lease_expires_at' | 'started_at' | 'cancel_requested' | 'runs'
  > {
    return {
      status: 'running',
      error_code: null,
      error_message: null,
      latency_ms: null,
      completed_at: null,
      lease_owner: this.deps.worker.owner,
      // Wall-clock, like every lease (durable.repository.ts).
      lease_expires_at: Date.now() + this.deps.leaseMs,
      started_at: now,
      cancel_requested: 0,
      runs: 1,
    };
  }

  /** Runs a row this process holds, for a client awaiting it; its disconnect aborts (fails and releases) the run. */
  private async runHeld(row: GenerationsTable, signal: AbortSignal): Promise<Omit<GenerationOutcome, 'credits'>> {
    try {
      return await this.deps.worker.holdLocal(row, signal, (held, runSignal) => this.execute(held, runSignal));
    } catch (error) {
      // Canceled (through any replica) or taken over while its client waited: it delivers nothing.
      if (error instanceof LeaseLost) throw await this.endedWhileRunning(row.id);
      throw error;
    }
  }

  /** The refusal of a waiting client whose generation was settled elsewhere (canceled, swept) while it ran. */
  private async endedWhileRunning(id: string): Promise<ApiError> {
    const ended = await findGeneration(this.deps.db, id).catch(() => undefined);
    const charged = Number(ended?.charged_credits ?? 0);
    const cost = charged > 0 ? `${charged} credits were charged for the upstream calls already sent` : 'nothing was charged';
    return new ApiError('generation_finished', `Generation ${id} was ${ended?.status ?? 'ended'} while it ran; no images are delivered and ${cost}.`);
  }

  /**
   * Runs a claimed generation and settles it exactly once: stored images and success (charged),
   * or failure/cancel (credits released). A takeover finds the upstream calls its predecessor sent:
   * an accepted visual task is polled again; a call sent but never acknowledged with a task id
   * (any Ark/images-API call, or a visual submit cut before its answer) cannot be resumed, and
   * sending it again could make the account pay twice, so the generation fails as `abandoned`.
   */
  async execute(row: GenerationsTable, signal: AbortSignal): Promise<Omit<GenerationOutcome, 'credits'>> {
    const { clock, channels, metrics, writes, db } = this.deps;
    if (row.request === null) throw new Error(`generation ${row.id} has no stored request`);
    const stored = JSON.parse(row.request) as StoredGenerationRequest;
    const { entry, request } = stored;
    const started = clock.now();
    // The channel attempts, written with the settlement (the same transaction, or statement), or alone when there is none.
    const attempts: GenerationAttemptsTable[] = [];
    let attemptsWritten = false;
    let attemptsInBackground = false;
    const settleFailure = async (error: unknown, code = errorCodeOf(error), unbilled = unbilledOf(stored, attempts, code === 'image_storage_unavailable')) => {
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
          return settled && (await this.completionWebhooks?.emit(trx, row.id)) === true;
        });
        attemptsWritten = true;
        if (hooked) this.completionWebhooks?.poke();
      } catch (settleError) {
        // The row stays active: released by a retry when the database is back, or by a takeover.
        this.deps.logger.error({ err: settleError, generation_id: row.id }, 'could not settle a failed generation');
        this.deps.onUnsettled?.(row.id, code);
      }
    };
    const tasks = row.runs > 1 ? await listGenerationTasks(db, row.id) : [];
    // The local provider sends nothing upstream: a takeover simply runs it again.
    const journal = entry.provider === 'local' ? undefined : new GenerationTaskJournal(writes, clock, this.deps.logger, row.id, tasks, stored.mark_sends, this.deps.worker.owner);
    if (row.runs > 1 && interrupted(stored, tasks)) {
      const error = new ApiError('provider_error', 'The generation was interrupted while an upstream call was in flight; it is not sent again, so it was not charged.');
      const lost = imagesOfCalls(stored, unacknowledgedCalls(stored, tasks));
      await settleFailure(error, 'abandoned', lost > 0 ? { images: lost, reason: 'abandoned' } : undefined);
      throw error;
    }
    try {
      const produced = await channels.generate(row.id, entry, request, signal, journal, attempts);
      // Stored before success is recorded: an image the client cannot get is never charged.
      const images = await this.deps.images.persist(
        { generationId: row.id, provider: entry.provider, images: produced, responseFormat: request.responseFormat, keepBase64: stored.keep_base64 },
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
                hooked = done && (await this.completionWebhooks?.emit(trx, row.id)) === true;
                return done;
              });
      } catch (error) {
        // A settlement sent but not answered may still commit (and charge) when a hung database resumes.
        throw row.key_id !== null && mayHaveCommitted(error) ? withChargeOutcome(error, { kind: 'unknown', generationId: row.id }) : error;
      }
      attemptsWritten = true;
      if (hooked) this.completionWebhooks?.poke();
      if (!settled) {
        // Canceled (on any replica), or failed by the sweeper, before it finished: the state it was
        // settled in stands, and no image leaves the gateway. A cancel charged the calls it found sent;
        // what else the upstream made is the operator's loss.
        this.deps.logger.warn({ generation_id: row.id }, 'generation finished after it had been settled elsewhere');
        await this.withdraw(row.id, stored, attempts);
        throw signal.aborted ? signal.reason : new LeaseLost(row.id, true);
      }
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
        void settleFailure(recorded).then(() => (attemptsWritten ? undefined : channels.recordAttempts(row.id, attempts)));
      } else {
        await settleFailure(error);
      }
      throw error;
    } finally {
      // Not settled here (the lease was lost, or settling failed): the attempts still go in.
      if (!attemptsWritten && !attemptsInBackground) await channels.recordAttempts(row.id, attempts);
    }
  }

  /** A finished run whose generation had been settled elsewhere: its stored images go, and a loss the settlement did not charge is listed. */
  private async withdraw(id: string, stored: StoredGenerationRequest, attempts: readonly GenerationAttemptsTable[]): Promise<void> {
    const { writes, clock, metrics, logger } = this.deps;
    try {
      await this.deps.images.withdraw(id);
      const ended = await findGeneration(this.deps.db, id);
      const made = unbilledOf(stored, attempts, false);
      if (ended && ended.status !== 'canceled' && made) {
        const unbilled = { images: made.images, reason: 'settled_elsewhere' } as const;
        await writes.run((trx) => recordUnbilled(trx, id, unbilled));
        metrics.unbilledImages.inc({ reason: unbilled.reason }, unbilled.images);
      }
    } catch (error) {
      logger.error({ err: error, generation_id: id, at: clock.now() }, 'could not withdraw the images of a generation settled elsewhere');
    }
  }

  private async reserve(key: ClientKey, entry: CatalogModel, n: number, stored: StoredGenerationRequest, held = true) {
    const { writes, clock } = this.deps;
    const now = clock.now();
    const cost = n * entry.credits_per_image;
    const generationId = newSortableId('gen', now);
    const request = JSON.stringify(stored);
    const reservationFailed = (error: unknown): unknown => {
      if (!isDatabaseOutage(error) || !mayHaveCommitted(error)) return error;
      // Queued (async), a late reservation would be run by a worker: what it costs is unknown until looked up.
      if (!held) return withChargeOutcome(error, { kind: 'unknown', generationId });
      // Held, it lapses with a lease nothing renews: released, never run, by the retries below (or a takeover or the sweeper).
      this.deps.onUnsettled?.(generationId, 'dependency_unavailable', true);
      return withChargeOutcome(error, { kind: 'reservation', generationId, releasedWithinSeconds: Math.ceil(this.deps.leaseMs / 1000) });
    };
    const generationOf = (row: Pick<GenerationsTable, 'period_started_at' | 'usage_epoch'>): GenerationsTable => ({
      ...(held ? this.heldRow(now) : QUEUED_ROW),
      id: generationId,
      key_id: key.id,
      client_id: null,
      model: entry.model,
      provider: entry.provider,
      images: n,
      credits: cost,
      period_started_at: row.period_started_at,
      created_at: now,
      usage_epoch: row.usage_epoch,
      request,
    });
    // PostgreSQL: one statement when the reservation writes no event (crosses no threshold, leaves credits).
    if (this.reserveInOneStatement) {
      const draft = generationOf({ period_started_at: now, usage_epoch: null });
      const row = await this.reserveInOneStatement({ reservation: { keyId: key.id, keyHash: key.keyHash, cost, now, alertThresholds: key.policy.alertThresholds }, row: draft }).catch(
        (error: unknown) => {
          throw reservationFailed(error);
        },
      );
      if (row) {
        return {
          row: { ...draft, period_started_at: row.period_started_at, usage_epoch: row.usage_epoch },
          cost,
          creditsRemaining: row.credits_quota - row.credits_used,
        };
      }
    }
    // Reservation and its usage row commit together: an active row always has credits behind it.
    // The period and book charged come from the key's row as the reservation found it, not from `key`.
    const reserved = await writes
      .run(async (trx) => {
        const row = await reserveCredits(trx, key, cost, now);
        if (!row) return undefined;
        // Threshold events commit with the reservation that crosses them, once per key, threshold and period.
        await emitQuotaEvents(trx, key, { used: row.credits_used, quota: row.credits_quota, cost, periodStart: row.period_started_at }, now);
        const generation = generationOf(row);
        await insertGeneration(trx, generation);
        return { key: row, generation };
      })
      .catch((error: unknown) => {
        throw reservationFailed(error);
      });
    if (!reserved) {
      // Refused: the key as it is now says why (the request's copy may predate an admin change).
      const current = await findKeyById(this.deps.db, key.id);
      const refusal = current && keyRefusal(current, key.keyHash, now);
      if (!current || refusal === 'rotated') throw new ApiError('invalid_api_key', 'The API key is malformed or unknown.');
      if (refusal === 'disabled') throw new ApiError('key_disabled', 'This API key has been disabled.');
      if (refusal === 'expired') throw new ApiError('key_expired', `This API key expired at ${toIso(current.expires_at as number)}.`);
      const periodStart = currentPeriodStart(current.created_at, current.quota_period_days, now);
      await writes.run((trx) => emitQuotaExhausted(trx, key, { used: null, quota: current.credits_quota, periodStart }, now));
      const resetsAt = toIso(periodEnd(periodStart, current.quota_period_days));
      throw new ApiError(
        'quota_exceeded',
        `This request needs ${cost} credits, more than is left of the key's quota of ${current.credits_quota}; the quota refills at ${resetsAt}.`,
        { details: { period_resets_at: resetsAt } },
      );
    }
    return { row: reserved.generation, cost, creditsRemaining: reserved.key.credits_quota - reserved.key.credits_used };
  }
}

/** A generation waiting for a worker: no lease, not started. */
const QUEUED_ROW = {
  status: 'queued',
  error_code: null,
  error_message: null,
  latency_ms: null,
  completed_at: null,
  lease_owner: null,
  lease_expires_at: null,
  started_at: null,
  cancel_requested: 0,
  runs: 0,
} as const;

/** latency_ms is a 32-bit integer column: a clock that steps (NTP, a test clock) must not make settlement fail. */
function elapsedMs(clock: Clock, started: number): number {
  return Math.min(Math.max(clock.now() - started, 0), 2_147_483_647);
}

/** What a failed generation records: the client's error for an ApiError or a dependency outage, else internal_error. */
function apiErrorOf(error: unknown): ApiError | undefined {
  return error instanceof ApiError ? error : dependencyApiError(error);
}

/** The database (not Redis) failed: down, hung, full or read-only. */
function isDatabaseOutage(error: unknown): boolean {
  return error instanceof DependencyUnavailableError ? error.dependency === 'database' : isDatabaseUnavailable(error);
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
  return stored.entry.provider !== 'local' && unacknowledgedCalls(stored, tasks).length > 0;
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
