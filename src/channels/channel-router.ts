import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { CatalogModel } from '../config/catalog';
import type { Database, GenerationAttemptsTable } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import type { ProviderImage, ProviderRequest } from '../providers/provider';
import type { ProviderRegistry } from '../providers/registry';
import { type BreakerState, CircuitBreaker } from '../providers/resilience/circuit-breaker';
import { ProviderStats } from '../providers/resilience/provider-stats';
import type { ResilienceSettings } from '../providers/resilience/resilience-settings';
import { UpstreamError } from '../providers/upstream-errors';
import type { Clock } from '../shared/clock';
import { emitChannelAutoDisabled } from '../webhooks/events';
import { type ChannelClient, apiChannelClient, oneImagePerCall } from './channel-clients';
import type { ChannelCaps, ChannelLimitStore, ChannelUsage } from './channel-limits';
import { type Channel, type ChannelCredentials, channelFromRow, environmentVariablesOf, servesModel } from './channel.model';
import type { CredentialSealer } from './channel-sealing';
import * as repo from './channels.repository';

export interface ChannelRouterDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  logger: Logger;
  sealer: CredentialSealer;
  /** Environment-configured channels and the providers that serve them. */
  environment: { channels: Channel[]; providers: ProviderRegistry };
  resilience: Record<string, ResilienceSettings>;
  /** Limits of API channels: shared by every replica (Redis or SQL). */
  sharedLimits: ChannelLimitStore;
  /** Limits of environment channels: per process (PROVIDER_<NAME>_MAX_CONCURRENCY). Each replica reads the account from its own environment and there is no channel row to share state on. */
  localLimits: ChannelLimitStore;
  queueTimeoutMs: number;
  /** How many calls of one model may wait for a slot on this replica; beyond, 503 at once. */
  queueMaxWaiters: number;
  pollIntervalMs: number;
  /** CHANNEL_ALLOW_PRIVATE_UPSTREAMS: else API channels connect to public addresses only. */
  allowPrivateUpstreams: boolean;
}

/** How long the channel list (and so a status change made on another replica) may be stale. */
const DIRECTORY_TTL_MS = 1000;
/** How often a request waiting for a slot looks again (a release on this replica wakes it at once). */
const QUEUE_POLL_MS = 50;

/** A call's place in its model's saturation line; `wake` ends its current wait early. */
interface QueueTicket {
  wake: () => void;
}
/** A slot outlives its call's deadline by this much before it is presumed lost with its replica. */
const LEASE_GRACE_MS = 2000;
/** The shared lease that lets one replica at a time run the periodic probe. */
const PROBE_LEASE = 'channel-probe';

const DEFAULT_RESILIENCE: ResilienceSettings = {
  timeoutMs: 60_000,
  maxAttempts: 3,
  retryBaseDelayMs: 500,
  maxConcurrent: 16,
  breakerThreshold: 5,
  breakerCooldownMs: 30_000,
};

interface Routable {
  channel: Channel;
  /** Undefined when the credentials cannot be opened (a sealing key is missing): never chosen. */
  client: ChannelClient | undefined;
}

/** What this replica knows about a channel beyond the database: breaker, cool-down, recent calls. */
interface ChannelRuntime {
  breaker: CircuitBreaker;
  stats: ProviderStats;
  coolingUntil: number;
  inFlight: number;
}

interface Attempt {
  imageIndex: number;
  channelId: string;
  outcome: 'succeeded' | 'failed' | 'failed_over';
  errorCode: string | null;
  latencyMs: number;
  startedAt: number;
}

interface RequestContext {
  entry: CatalogModel;
  settings: ResilienceSettings;
  deadline: number;
  signal: AbortSignal;
  attempts: Attempt[];
  journal?: TaskJournal;
  /** The first failure of one of the request's images: the others send nothing more. */
  stopped?: unknown;
}

/**
 * What a durable generation records about its upstream calls, per image (src/generation): a call
 * is marked before it is sent, its task id stored once the upstream accepted it, and the mark
 * dropped when the call provably reached nothing. A takeover polls the stored task instead.
 */
export interface TaskJournal {
  /** The task of this image accepted earlier (by a process that died), to poll on its channel. */
  resume(imageIndex: number): { channelId: string; taskId: string } | undefined;
  /** Before a call is sent; throws (and the call is not sent) when the generation may no longer send it. */
  sending(imageIndex: number, channelId: string): Promise<void>;
  accepted(imageIndex: number, channelId: string, taskId: string): Promise<void>;
  unsent(imageIndex: number): Promise<void>;
}

export interface ChannelHealth {
  channel: Channel;
  circuit: BreakerState;
  usage: ChannelUsage;
  coolingUntil: number | null;
  stats: ReturnType<ProviderStats['snapshot']>;
}

export interface ProviderHealthSummary {
  circuit: BreakerState;
  in_flight: number;
  calls: number;
  error_rate: number;
  latency_ms: { p50: number | null; p95: number | null; p99: number | null };
}

export interface ChannelTestOutcome {
  ok: boolean;
  latencyMs: number;
  error?: ApiError;
}

/** Weighted random order (Efraimidis-Spirakis): the first is picked with probability weight / total. */
function weightedOrder<T extends { channel: Channel }>(items: T[]): T[] {
  return items
    .map((item) => ({ item, key: Math.random() ** (1 / Math.max(1, item.channel.weight)) }))
    .sort((a, b) => b.key - a.key)
    .map((entry) => entry.item);
}

/** Highest priority tier first, weighted random within each tier. */
function routingOrder<T extends { channel: Channel }>(items: T[]): T[] {
  const tiers = [...new Set(items.map((i) => i.channel.priority))].sort((a, b) => b - a);
  return tiers.flatMap((priority) => weightedOrder(items.filter((i) => i.channel.priority === priority)));
}

const retryAfterHeader = (ms: number) => ({ 'Retry-After': String(Math.max(1, Math.ceil(ms / 1000))) });

/**
 * Sends each generation to a channel (upstream account) of its model: enabled, under its limits,
 * not cooling down, breaker not open; the highest priority tier first, weighted random within it.
 * A failure that proves the upstream accepted nothing moves the call to another channel (never one
 * that already failed it) within the request's one deadline; anything the upstream may have
 * accepted is never sent again. See docs/operators/channels.md.
 */
export class ChannelRouter {
  private directory: { loadedAt: number; channels: Routable[] } | undefined;
  private loading: Promise<Routable[]> | undefined;
  private readonly clients = new Map<string, { version: number; client: ChannelClient | undefined }>();
  private readonly runtimes = new Map<string, ChannelRuntime>();
  private readonly providerStats = new Map<string, ProviderStats>();
  /**
   * Calls waiting for a slot on this replica, per model, in arrival order (bounded by queueMaxWaiters).
   * The first of a line polls the limit store every QUEUE_POLL_MS and is woken by a local release; the
   * k-th polls every k+1 periods, so a saturated model costs the store a number of round trips per replica
   * that grows with the log of the line's length, not with it, while a call the first cannot stand for
   * (it failed over from another channel, or asks for more images) still gets its own turns.
   */
  private readonly lines = new Map<string, QueueTicket[]>();
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(private readonly deps: ChannelRouterDeps) {}

  // ---- the channel directory ------------------------------------------------------------------

  /** Every channel (environment first), re-read from the database at most once a second. */
  async channels(): Promise<Routable[]> {
    const now = this.deps.clock.now();
    if (this.directory && now - this.directory.loadedAt < DIRECTORY_TTL_MS) return this.directory.channels;
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  /** Forget the cached list: the next request reads the database (after a change on this replica). */
  invalidate(): void {
    this.directory = undefined;
  }

  private async load(): Promise<Routable[]> {
    const loadedAt = this.deps.clock.now();
    const rows = await repo.listChannelRows(this.deps.db);
    const fromApi = rows.map((row) => {
      const channel = channelFromRow(row);
      return { channel, client: this.clientFor(channel, row.credentials_sealed) };
    });
    const fromEnvironment = this.deps.environment.channels.map((channel) => ({ channel, client: this.deps.environment.providers.get(channel.provider) }));
    const channels = [...fromEnvironment, ...fromApi];
    const live = new Set(rows.map((r) => r.id));
    for (const id of this.clients.keys()) if (!live.has(id)) this.clients.delete(id);
    this.directory = { loadedAt, channels };
    // Credentials sealed with an older key are sealed again with the newest (rotation).
    for (const row of rows) {
      if (this.deps.sealer.isStale(row.credentials_sealed) && this.clients.get(row.id)?.client) {
        const opened = this.openCredentials(row.id, row.credentials_sealed);
        if (opened) {
          repo
            .resealCredentials(this.deps.db, row.id, row.credentials_sealed, this.deps.sealer.seal(row.id, JSON.stringify(opened)))
            .catch((error: unknown) => this.deps.logger.warn({ err: error, channel_id: row.id }, 'could not re-seal channel credentials'));
        }
      }
    }
    return channels;
  }

  private openCredentials(id: string, sealed: string): ChannelCredentials | undefined {
    try {
      return JSON.parse(this.deps.sealer.open(id, sealed)) as ChannelCredentials;
    } catch (error) {
      // The message names the key id, never the credentials.
      this.deps.logger.error({ channel_id: id, reason: (error as Error).message }, 'cannot open channel credentials; the channel is skipped');
      return undefined;
    }
  }

  /** Clients are kept per channel version (updated_at), so credentials are opened once per change. */
  private clientFor(channel: Channel, sealed: string): ChannelClient | undefined {
    const cached = this.clients.get(channel.id);
    if (cached && cached.version === channel.updatedAt) return cached.client;
    const credentials = this.openCredentials(channel.id, sealed);
    const client = credentials && apiChannelClient(channel, credentials, { pollIntervalMs: this.deps.pollIntervalMs, publicOnly: !this.deps.allowPrivateUpstreams });
    this.clients.set(channel.id, { version: channel.updatedAt, client });
    return client;
  }

  // ---- routing --------------------------------------------------------------------------------

  private runtime(channel: Channel): ChannelRuntime {
    let runtime = this.runtimes.get(channel.id);
    if (!runtime) {
      const settings = this.settingsOf(channel.provider);
      runtime = { breaker: new CircuitBreaker(settings.breakerThreshold, settings.breakerCooldownMs, this.deps.clock), stats: new ProviderStats(), coolingUntil: 0, inFlight: 0 };
      this.runtimes.set(channel.id, runtime);
    }
    return runtime;
  }

  private settingsOf(provider: string): ResilienceSettings {
    return this.deps.resilience[provider] ?? DEFAULT_RESILIENCE;
  }

  private limitsOf(channel: Channel): ChannelLimitStore {
    return channel.source === 'environment' ? this.deps.localLimits : this.deps.sharedLimits;
  }

  private caps(channel: Channel): ChannelCaps {
    return { maxConcurrency: channel.maxConcurrency, rpm: channel.rpm, ipm: channel.ipm, leaseMs: channel.timeoutMs + LEASE_GRACE_MS };
  }

  /**
   * Generates `request` for `entry` on its channels and records every attempt under
   * `generationId`. One call per image on transports that make one image per call, each routed
   * (and failed over) on its own.
   */
  /**
   * `attempts`: when given, the attempt rows are pushed there for the caller to write with the
   * generation's settlement (one statement); without it they are written here in a transaction of their own.
   */
  async generate(
    generationId: string,
    entry: CatalogModel,
    request: ProviderRequest,
    clientSignal: AbortSignal,
    journal?: TaskJournal,
    attempts?: GenerationAttemptsTable[],
  ): Promise<ProviderImage[]> {
    const settings = this.settingsOf(entry.provider);
    const controller = new AbortController();
    let deadlinePassed = false;
    const timer = setTimeout(() => {
      deadlinePassed = true;
      controller.abort(this.timeoutError(entry.provider, settings.timeoutMs));
    }, settings.timeoutMs);
    const onClientGone = () => controller.abort(clientSignal.reason);
    if (clientSignal.aborted) onClientGone();
    else clientSignal.addEventListener('abort', onClientGone, { once: true });
    const context: RequestContext = { entry, settings, deadline: this.deps.clock.now() + settings.timeoutMs, signal: controller.signal, attempts: [], journal };
    const started = this.deps.clock.now();
    const stats = this.statsOf(entry.provider);
    try {
      const split = request.n > 1 && oneImagePerCall({ transport: (entry.transport ?? 'images-api') as Channel['transport'] });
      const units = split
        ? Array.from({ length: request.n }, (_, index) => ({ ...request, n: 1, ...(request.seed !== undefined ? { seed: request.seed + index } : {}) }))
        : [request];
      // Once one image has failed no further call is sent, but calls already sent are waited for: each
      // is recorded as an attempt, so what the upstream made for a failed request is known (and listed).
      const outcomes = await Promise.allSettled(
        units.map((unit, index) =>
          this.routeCall(context, unit, index).catch((error: unknown) => {
            context.stopped ??= error;
            throw error;
          }),
        ),
      );
      const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      if (failed) throw context.stopped ?? failed.reason;
      stats.record(true, this.deps.clock.now() - started);
      return outcomes.flatMap((outcome) => (outcome as PromiseFulfilledResult<ProviderImage[]>).value);
    } catch (error) {
      const failure = deadlinePassed && !clientSignal.aborted ? this.timeoutError(entry.provider, settings.timeoutMs) : error;
      const providerAtFault = failure instanceof UpstreamError ? failure.countsAgainstProvider : failure instanceof ApiError && failure.code === 'provider_timeout';
      stats.record(!providerAtFault, this.deps.clock.now() - started);
      throw failure;
    } finally {
      clearTimeout(timer);
      clientSignal.removeEventListener('abort', onClientGone);
      const rows = attemptRows(generationId, context.attempts);
      if (attempts) attempts.push(...rows);
      else await this.recordAttempts(generationId, rows);
    }
  }

  /** Writes attempt rows in a transaction of their own; a failure is logged, never thrown. */
  async recordAttempts(generationId: string, rows: GenerationAttemptsTable[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      await this.deps.writes.run((trx) => repo.insertAttempts(trx, rows));
    } catch (error) {
      this.deps.logger.error({ err: error, generation_id: generationId }, 'could not record generation attempts');
    }
  }

  private timeoutError(provider: string, timeoutMs: number): ApiError {
    return new ApiError('provider_timeout', `Provider ${provider} did not answer within ${timeoutMs / 1000} s.`);
  }

  /** One upstream call, failed over between channels until it succeeds or must not be sent again. */
  private async routeCall(context: RequestContext, request: ProviderRequest, imageIndex: number): Promise<ProviderImage[]> {
    const resume = context.journal?.resume(imageIndex);
    if (resume) return this.resumeCall(context, request, imageIndex, resume);
    const failedOver = new Set<string>();
    const busyTries = new Map<string, number>();
    let lastError: UpstreamError | undefined;
    for (;;) {
      const pick = await this.acquire(context, request.n, failedOver, lastError);
      const { channel, client, leaseId } = pick;
      const journal = context.journal;
      try {
        // Another image of the request failed while this one waited for its channel: not sent.
        if (context.stopped !== undefined) throw context.stopped;
        // The journal refuses a call its generation may no longer send (canceled, or taken over).
        await journal?.sending(imageIndex, channel.id);
      } catch (error) {
        if (leaseId !== undefined) await this.release(channel, leaseId);
        throw error;
      }
      const runtime = this.runtime(channel);
      const started = this.deps.clock.now();
      const remainingMs = context.deadline - started;
      const attemptMs = Math.max(1, Math.min(channel.timeoutMs, remainingMs));
      // A channel deadline that ends no earlier than the request's needs no timer or signal of its
      // own: the request's ends the attempt first (its timer was set first, for the same moment).
      const attempt = channel.timeoutMs < remainingMs ? new AbortController() : undefined;
      let attemptTimedOut = false;
      const timer =
        attempt &&
        setTimeout(() => {
          attemptTimedOut = true;
          attempt.abort(this.timeoutError(channel.provider, attemptMs));
        }, attemptMs);
      const onRequestEnd = () => attempt?.abort(context.signal.reason);
      if (attempt) {
        if (context.signal.aborted) onRequestEnd();
        else context.signal.addEventListener('abort', onRequestEnd, { once: true });
      }
      const attemptSignal = attempt?.signal ?? context.signal;
      runtime.inFlight += 1;
      try {
        const upstreamModel = channel.models.find((m) => m.model === context.entry.model)?.upstream_model ?? request.upstreamModel;
        const onTaskAccepted = journal && ((taskId: string) => journal.accepted(imageIndex, channel.id, taskId));
        const images = await client.generate({ ...request, upstreamModel, ...(onTaskAccepted ? { onTaskAccepted } : {}) }, attemptSignal);
        runtime.breaker.onSuccess();
        runtime.stats.record(true, this.deps.clock.now() - started);
        context.attempts.push({ imageIndex, channelId: channel.id, outcome: 'succeeded', errorCode: null, latencyMs: this.deps.clock.now() - started, startedAt: started });
        // The account's own host may serve its image URLs, whatever the provider's default host is.
        const sourceHost = hostOf(channel.baseUrl);
        return sourceHost === undefined ? images : images.map((image) => ({ ...image, sourceHost }));
      } catch (error) {
        const failure = attemptTimedOut && !context.signal.aborted ? this.timeoutError(channel.provider, attemptMs) : error;
        const moveOn = await this.judgeFailure(context, channel, runtime, failure, busyTries, failedOver, this.deps.clock.now() - started);
        context.attempts.push({
          imageIndex,
          channelId: channel.id,
          outcome: moveOn ? 'failed_over' : 'failed',
          errorCode: failure instanceof ApiError ? failure.code : 'internal_error',
          latencyMs: this.deps.clock.now() - started,
          startedAt: started,
        });
        if (!moveOn) throw failure;
        await context.journal?.unsent(imageIndex);
        lastError = failure as UpstreamError;
      } finally {
        if (attempt) {
          clearTimeout(timer);
          context.signal.removeEventListener('abort', onRequestEnd);
        }
        runtime.inFlight -= 1;
        if (leaseId !== undefined) await this.release(channel, leaseId);
      }
    }
  }

  /**
   * Polls a task a dead process had submitted, on the channel that accepted it: outside the
   * channel's limits (the work is already running upstream) and never sent anywhere else.
   */
  private async resumeCall(
    context: RequestContext,
    request: ProviderRequest,
    imageIndex: number,
    resume: { channelId: string; taskId: string },
  ): Promise<ProviderImage[]> {
    const routable = (await this.channels()).find((r) => r.channel.id === resume.channelId);
    if (!routable?.client) {
      throw new ApiError('provider_unavailable', `The channel that accepted task ${resume.taskId} is gone or cannot be opened; the task is not sent again.`);
    }
    const { channel, client } = routable;
    const started = this.deps.clock.now();
    try {
      const upstreamModel = channel.models.find((m) => m.model === context.entry.model)?.upstream_model ?? request.upstreamModel;
      const images = await client.generate({ ...request, upstreamModel, resumeTaskId: resume.taskId }, context.signal);
      context.attempts.push({ imageIndex, channelId: channel.id, outcome: 'succeeded', errorCode: null, latencyMs: this.deps.clock.now() - started, startedAt: started });
      const sourceHost = hostOf(channel.baseUrl);
      return sourceHost === undefined ? images : images.map((image) => ({ ...image, sourceHost }));
    } catch (error) {
      const code = error instanceof ApiError ? error.code : 'internal_error';
      context.attempts.push({ imageIndex, channelId: channel.id, outcome: 'failed', errorCode: code, latencyMs: this.deps.clock.now() - started, startedAt: started });
      throw error;
    }
  }

  /**
   * Whether a call for `entry` could start now on some channel: enabled, breaker not open, not
   * cooling down, under its concurrency cap, its limit store answering. Only a hint (no slot is
   * taken): the durable worker leaves work queued while it is false, so a burst waits in the queue
   * rather than in sockets, and work queued during a Redis outage waits for Redis instead of failing.
   */
  async hasRoom(entry: CatalogModel): Promise<boolean> {
    const now = this.deps.clock.now();
    for (const { channel, client } of await this.channels()) {
      if (!servesModel(channel, entry) || channel.status !== 'enabled' || client === undefined) continue;
      const runtime = this.runtime(channel);
      if (runtime.breaker.state === 'open' || runtime.coolingUntil > now) continue;
      let usage: ChannelUsage;
      try {
        usage = await this.limitsOf(channel).usage(channel.id, now);
      } catch {
        // Logged by the store's health; a slot could not be taken there now.
        continue;
      }
      if (channel.maxConcurrency === null || usage.inFlight < channel.maxConcurrency) return true;
    }
    return false;
  }

  /**
   * Updates the channel's health from a failure and says whether the call may go to another
   * channel: only when the upstream provably accepted nothing, and the request is still wanted.
   */
  private async judgeFailure(
    context: RequestContext,
    channel: Channel,
    runtime: ChannelRuntime,
    failure: unknown,
    busyTries: Map<string, number>,
    failedOver: Set<string>,
    latencyMs: number,
  ): Promise<boolean> {
    const now = this.deps.clock.now();
    const upstream = failure instanceof UpstreamError ? failure : undefined;
    const providerAtFault =
      (upstream?.countsAgainstProvider ?? (failure instanceof ApiError && failure.code === 'provider_timeout')) && upstream?.code !== 'provider_busy';
    if (providerAtFault) runtime.breaker.onFailure();
    else runtime.breaker.onNeutral();
    runtime.stats.record(!providerAtFault && upstream?.code !== 'provider_busy', latencyMs);
    if (upstream?.traits.accountProblem) await this.autoDisable(channel, upstream);
    if (!upstream?.traits.safeElsewhere || context.signal.aborted) return false;
    if (upstream.retryable) {
      // Busy: cool the channel down for its Retry-After (else exponential backoff with jitter);
      // the same channel may be tried again after it, up to maxAttempts times.
      const tries = (busyTries.get(channel.id) ?? 0) + 1;
      busyTries.set(channel.id, tries);
      const backoff = context.settings.retryBaseDelayMs * 2 ** (tries - 1) * (0.5 + Math.random());
      const until = now + (upstream.traits.retryAfterMs ?? backoff);
      runtime.coolingUntil = Math.max(runtime.coolingUntil, until);
      await this.shareCoolDown(channel, until, now);
      if (tries >= context.settings.maxAttempts) failedOver.add(channel.id);
      return true;
    }
    failedOver.add(channel.id);
    return true;
  }

  /**
   * Takes an API channel out after an account error, on every replica (they re-read within a second).
   * The channel.auto_disabled event is written in the same transaction, and only when this update
   * changed the row (it is conditional on `enabled`), so replicas seeing the same error emit it once.
   */
  private async autoDisable(channel: Channel, failure: UpstreamError): Promise<void> {
    // Environment channels are read-only: their account is fixed in the environment.
    if (channel.source !== 'api') return;
    const reason = failure.traits.accountProblem ?? failure.message;
    try {
      const disabled = await this.deps.writes.run(async (trx) => {
        const now = this.deps.clock.now();
        if (!(await repo.autoDisableChannel(trx, channel.id, reason, now))) return false;
        await emitChannelAutoDisabled(trx, { channelId: channel.id, provider: channel.provider, reason: reason.slice(0, 500), statusCode: failure.traits.statusCode }, now);
        return true;
      });
      if (disabled) this.deps.logger.warn({ channel_id: channel.id, reason }, 'channel auto-disabled after an account error');
      this.invalidate();
    } catch (error) {
      this.deps.logger.error({ err: error, channel_id: channel.id }, 'could not auto-disable a channel');
    }
  }

  /** Every replica stops choosing the channel until `until` (the store's acquire checks it). */
  private async shareCoolDown(channel: Channel, until: number, now: number): Promise<void> {
    try {
      await this.limitsOf(channel).coolDown(channel.id, until, now);
    } catch (error) {
      // This replica still honours it; the others learn of it from the account's next busy answer.
      this.deps.logger.warn({ err: error, channel_id: channel.id }, 'could not share a channel cool-down');
    }
  }

  private async release(channel: Channel, leaseId: string): Promise<void> {
    try {
      await this.limitsOf(channel).release(channel.id, leaseId);
    } catch (error) {
      // The lease expires by itself.
      this.deps.logger.warn({ err: error, channel_id: channel.id }, 'could not release a channel slot');
    }
    // The slot may serve any model of this channel: the first call of each line tries.
    for (const line of this.lines.values()) line[0]?.wake();
  }

  /**
   * The channel for the next try: candidates are the enabled channels of the model not yet failed,
   * breaker not open, not cooling down, under their limits. When all are saturated or cooling,
   * waits (bounded by CHANNEL_QUEUE_TIMEOUT_MS and the deadline, at most CHANNEL_QUEUE_MAX_WAITERS
   * calls of a model at once), then 503 provider_busy.
   */
  private async acquire(
    context: RequestContext,
    images: number,
    failedOver: ReadonlySet<string>,
    lastError: UpstreamError | undefined,
  ): Promise<{ channel: Channel; client: ChannelClient; leaseId: string | undefined }> {
    const { entry } = context;
    const queueDeadline = Math.min(this.deps.clock.now() + this.deps.queueTimeoutMs, context.deadline);
    let ticket: QueueTicket | undefined;
    try {
      return await this.acquireOrWait(context, images, failedOver, lastError, queueDeadline, () => {
        // Joins the line once; a full line answers at once rather than piling up callers.
        if (ticket) return ticket;
        const line = this.lines.get(entry.model) ?? [];
        if (line.length >= this.deps.queueMaxWaiters) return undefined;
        ticket = { wake: () => undefined };
        line.push(ticket);
        this.lines.set(entry.model, line);
        return ticket;
      });
    } finally {
      if (ticket) this.leaveLine(entry.model, ticket);
    }
  }

  private async acquireOrWait(
    context: RequestContext,
    images: number,
    failedOver: ReadonlySet<string>,
    lastError: UpstreamError | undefined,
    queueDeadline: number,
    joinQueue: () => QueueTicket | undefined,
  ): Promise<{ channel: Channel; client: ChannelClient; leaseId: string | undefined }> {
    const { entry } = context;
    for (;;) {
      context.signal.throwIfAborted();
      const serving = (await this.channels()).filter((r) => servesModel(r.channel, entry));
      if (serving.length === 0) throw this.unconfigured(entry);
      const enabled = serving.filter((r) => r.channel.status === 'enabled' && r.client !== undefined && !failedOver.has(r.channel.id));
      if (enabled.length === 0) throw this.finalError(entry, lastError);
      const closed = enabled.filter((r) => this.runtime(r.channel).breaker.state !== 'open');
      if (closed.length === 0) {
        const seconds = Math.min(...enabled.map((r) => this.runtime(r.channel).breaker.retryAfterMs()));
        throw new ApiError('provider_unavailable', `Provider ${entry.provider} is failing on every channel of ${entry.model}; calls are paused (circuit open).`, {
          headers: retryAfterHeader(seconds),
        });
      }
      const now = this.deps.clock.now();
      let soonestMs = Infinity;
      let storeFailure: unknown;
      for (const candidate of routingOrder(closed)) {
        const { channel } = candidate;
        const runtime = this.runtime(channel);
        if (runtime.coolingUntil > now) {
          soonestMs = Math.min(soonestMs, runtime.coolingUntil - now);
          continue;
        }
        if (!runtime.breaker.tryAcquire()) continue;
        const checkedAt = this.deps.clock.now();
        let taken: Awaited<ReturnType<ChannelLimitStore['acquire']>>;
        try {
          taken = await this.limitsOf(channel).acquire(channel.id, this.caps(channel), images, checkedAt);
        } catch (error) {
          // Its limit store failed (Redis or the database down): a half-open breaker's one probe must not
          // stay taken, and a channel whose limits live elsewhere (in this process) may still serve.
          runtime.breaker.onNeutral();
          storeFailure ??= error;
          continue;
        }
        if ('leaseId' in taken) return { channel, client: candidate.client!, leaseId: taken.leaseId };
        runtime.breaker.onNeutral();
        // Cooling down on another replica's word: skip the store until then.
        if (taken.refused === 'cooling_down') runtime.coolingUntil = Math.max(runtime.coolingUntil, checkedAt + taken.retryAfterMs);
        soonestMs = Math.min(soonestMs, taken.retryAfterMs);
      }
      // Nothing to wait for: no channel is at a limit that frees, and a store that failed answers with its outage.
      if (storeFailure !== undefined && !Number.isFinite(soonestMs)) throw storeFailure;
      const remaining = queueDeadline - this.deps.clock.now();
      const retryAfter = retryAfterHeader(Number.isFinite(soonestMs) ? soonestMs : 1000);
      if (remaining <= 0) {
        throw new UpstreamError('provider_busy', `Every channel of ${entry.model} is at its limit or busy; retry shortly.`, false, { headers: retryAfter });
      }
      const ticket = joinQueue();
      if (!ticket) {
        throw new UpstreamError('provider_busy', `Every channel of ${entry.model} is at its limit or busy, and its queue is full; retry shortly.`, false, {
          headers: retryAfter,
        });
      }
      const position = Math.max(0, this.lines.get(entry.model)?.indexOf(ticket) ?? 0);
      const period = Math.min(QUEUE_POLL_MS, Number.isFinite(soonestMs) ? Math.max(1, soonestMs) : QUEUE_POLL_MS);
      await this.waitForSlot(ticket, Math.min(remaining, period * (position + 1)), context.signal);
    }
  }

  private waitForSlot(ticket: QueueTicket, ms: number, signal: AbortSignal): Promise<void> {
    // Aborted while it looked for a slot: the caller's loop throws at once (an abort listener added now would never fire).
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        ticket.wake = () => undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      ticket.wake = done;
    });
  }

  /** Leaves the line; when the call was first, the next one starts polling at once. */
  private leaveLine(model: string, ticket: QueueTicket): void {
    const line = this.lines.get(model);
    if (!line) return;
    const at = line.indexOf(ticket);
    if (at === -1) return;
    line.splice(at, 1);
    if (line.length === 0) this.lines.delete(model);
    else if (at === 0) line[0]?.wake();
  }

  /** When no channel is left to try: the last failure (busy ones with a Retry-After), else unavailable. */
  private finalError(entry: CatalogModel, lastError: UpstreamError | undefined): ApiError {
    if (lastError?.code === 'provider_busy') {
      const settings = this.settingsOf(entry.provider);
      return new UpstreamError('provider_busy', `${lastError.message} (gave up after trying every channel)`, false, {
        headers: retryAfterHeader(lastError.traits.retryAfterMs ?? settings.retryBaseDelayMs * 2 ** settings.maxAttempts),
      });
    }
    return lastError ?? new ApiError('provider_unavailable', `No enabled channel serves ${entry.model} now; see GET /admin/channels.`, { param: 'model' });
  }

  private unconfigured(entry: CatalogModel): ApiError {
    const transport = (entry.transport ?? (entry.provider === 'local' ? 'local' : 'images-api')) as Channel['transport'];
    const variables = environmentVariablesOf({ transport } as Channel).split(', ').slice(0, transport === 'visual' ? 2 : 1).join(' and ');
    return new ApiError('provider_unavailable', `Provider ${entry.provider} is not configured on this gateway: set ${variables}, or add a channel.`, {
      param: 'model',
    });
  }

  private statsOf(provider: string): ProviderStats {
    let stats = this.providerStats.get(provider);
    if (!stats) {
      stats = new ProviderStats();
      this.providerStats.set(provider, stats);
    }
    return stats;
  }

  // ---- health, test, probe --------------------------------------------------------------------

  /** Calls waiting for a slot on this replica, per model (the saturation queue's depth). */
  waitingByModel(): Array<[string, number]> {
    return [...this.lines].map(([model, line]) => [model, line.length] as [string, number]).filter(([, count]) => count > 0);
  }

  /** Whether any channel (whatever its status) serves models of `provider` over `transport`. */
  async isConfigured(provider: string, transport?: string): Promise<boolean> {
    return (await this.channels()).some((r) => r.channel.provider === provider && (transport === undefined || r.channel.transport === transport || r.channel.transport === 'local'));
  }

  /** A provider's health on this replica: its requests' outcomes and the best breaker among its channels. */
  async providerHealth(provider: string): Promise<ProviderHealthSummary> {
    const channels = (await this.channels()).filter((r) => r.channel.provider === provider && r.channel.status === 'enabled');
    const states = channels.map((r) => this.runtime(r.channel).breaker.state);
    const circuit: BreakerState = states.length === 0 || states.includes('closed') ? 'closed' : states.includes('half_open') ? 'half_open' : 'open';
    const inFlight = channels.reduce((sum, r) => sum + this.runtime(r.channel).inFlight, 0);
    return { circuit, in_flight: inFlight, ...this.statsOf(provider).snapshot() };
  }

  async health(): Promise<ChannelHealth[]> {
    const now = this.deps.clock.now();
    return Promise.all(
      (await this.channels()).map(async ({ channel }) => {
        const runtime = this.runtime(channel);
        const usage = await this.limitsOf(channel).usage(channel.id, now);
        // The shared cool-down, or this replica's own (a store that could not be written).
        const coolingUntil = Math.max(usage.coolingUntil ?? 0, runtime.coolingUntil);
        return {
          channel,
          circuit: runtime.breaker.state,
          usage,
          coolingUntil: coolingUntil > now ? coolingUntil : null,
          stats: runtime.stats.snapshot(),
        };
      }),
    );
  }

  /**
   * One real call on the channel, outside its limits and breaker: one image of `entry`. A pass
   * re-enables an auto-disabled channel; an account error auto-disables it.
   */
  async test(channelId: string, entry: CatalogModel): Promise<ChannelTestOutcome> {
    this.invalidate();
    const routable = (await this.channels()).find((r) => r.channel.id === channelId);
    if (!routable) throw new ApiError('channel_not_found', `No channel with id ${channelId}.`, { param: 'id' });
    const { channel, client } = routable;
    const started = this.deps.clock.now();
    if (!client) return { ok: false, latencyMs: 0, error: new ApiError('provider_unavailable', 'The channel credentials cannot be opened: a sealing key is missing.') };
    const [width, height] = entry.default_size.split('x').map(Number) as [number, number];
    try {
      await client.generate(
        {
          prompt: 'a small red circle on a white background',
          upstreamModel: channel.models.find((m) => m.model === entry.model)?.upstream_model ?? entry.upstream_model,
          transport: channel.transport,
          upstreamOptions: entry.upstream_options,
          n: 1,
          width,
          height,
          responseFormat: 'url',
        },
        AbortSignal.timeout(channel.timeoutMs),
      );
    } catch (error) {
      const apiError = error instanceof ApiError ? error : new ApiError('provider_timeout', `The channel did not answer within ${channel.timeoutMs / 1000} s.`);
      if (error instanceof UpstreamError && error.traits.accountProblem) await this.autoDisable(channel, error);
      return { ok: false, latencyMs: this.deps.clock.now() - started, error: apiError };
    }
    if (channel.status === 'auto_disabled') {
      await repo.updateChannelRow(this.deps.db, channel.id, { status: 'enabled', disabled_reason: null, disabled_at: null, updated_at: this.deps.clock.now() });
      this.deps.logger.info({ channel_id: channel.id }, 'channel re-enabled after a passing test');
      this.invalidate();
    }
    this.runtime(channel).breaker.onSuccess();
    return { ok: true, latencyMs: this.deps.clock.now() - started };
  }

  /**
   * Every `intervalMs`, tests the auto-disabled channels and re-enables those that pass: on one
   * replica at a time, once an interval across all of them (see probeOnce).
   */
  startProbe(intervalMs: number, catalog: ReadonlyMap<string, CatalogModel>): void {
    if (intervalMs <= 0) return;
    this.probeTimer = setInterval(() => {
      this.probeOnce(intervalMs, catalog).catch((error: unknown) => this.deps.logger.warn({ err: error }, 'channel probe failed'));
    }, intervalMs);
    this.probeTimer.unref();
  }

  /**
   * One probe round, if this replica takes the shared probe lease (else another replica probes or
   * did within the interval). The lease covers the round (each test is bounded by its channel's
   * timeout), then is left to run out `intervalMs` after the round began, so the next round, on
   * whichever replica, starts an interval later. True when this replica probed.
   */
  async probeOnce(intervalMs: number, catalog: ReadonlyMap<string, CatalogModel>): Promise<boolean> {
    if (this.probing) return false;
    this.probing = true;
    try {
      this.invalidate();
      const due = (await this.channels())
        .map(({ channel }) => ({ channel, entry: catalog.get(channel.models[0]?.model ?? '') }))
        .filter((c): c is { channel: Channel; entry: CatalogModel } => c.channel.status === 'auto_disabled' && c.channel.source === 'api' && c.entry !== undefined);
      if (due.length === 0) return false;
      const started = this.deps.clock.now();
      const holder = randomBytes(9).toString('base64url');
      const roundMs = due.reduce((sum, c) => sum + c.channel.timeoutMs, 0) + LEASE_GRACE_MS;
      if (!(await this.deps.sharedLimits.takeLease(PROBE_LEASE, holder, started + Math.max(intervalMs, roundMs), started))) return false;
      try {
        for (const { channel, entry } of due) {
          const outcome = await this.test(channel.id, entry).catch(() => undefined);
          this.deps.logger.info({ channel_id: channel.id, ok: outcome?.ok ?? false }, 'probed an auto-disabled channel');
        }
      } finally {
        await this.deps.sharedLimits.endLeaseAt(PROBE_LEASE, holder, started + intervalMs, this.deps.clock.now());
      }
      return true;
    } finally {
      this.probing = false;
    }
  }

  async close(): Promise<void> {
    if (this.probeTimer) clearInterval(this.probeTimer);
    await this.deps.sharedLimits.close();
  }
}

function hostOf(url: string | null): string | undefined {
  if (url === null) return undefined;
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}

function attemptRows(generationId: string, attempts: Attempt[]): GenerationAttemptsTable[] {
  return attempts.map((a, seq) => ({
    generation_id: generationId,
    seq,
    image_index: a.imageIndex,
    channel_id: a.channelId,
    outcome: a.outcome,
    error_code: a.errorCode,
    // An integer column: a clock that steps (NTP, a test clock) must not make the settlement that writes it fail.
    latency_ms: Math.min(Math.max(a.latencyMs, 0), 2_147_483_647),
    started_at: a.startedAt,
  }));
}
