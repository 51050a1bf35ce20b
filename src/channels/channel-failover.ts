import type { CatalogModel } from '../config/catalog';
import type { GenerationAttemptsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { callsOfEntry, familyOfEntry, taskLifeOf } from '../providers/formats';
import type { ProviderImage, ProviderRequest } from '../providers/provider';
import { type Attempt, attemptRows, callUsage } from './channel-attempts';
import { UpstreamError, withoutPrompt } from '../providers/upstream-errors';
import { AbortLink } from '../shared/abort-chain';
import type { ChannelDirectory } from './channel-directory';
import type { ChannelRouterDeps, ChannelRuntime, ChannelRuntimes } from './channel-runtime';
import type { CallScope, ChannelWaitLine } from './channel-wait-line';
import type { Channel } from './channel.model';
import type { ResilienceSettings } from './resilience/resilience-settings';

interface RequestContext extends CallScope {
  generationId: string;
  settings: ResilienceSettings;
  attempts: Attempt[];
  journal?: TaskJournal;
  losses: UpstreamLosses;
  /** The first failure of one of the request's images: the others send nothing more. */
  stopped?: unknown;
}

/**
 * What the upstream billed that the attempt rows do not show (src/generation/charges.ts books it):
 * images it billed beyond those it delivered (Ark's `usage.generated_images`), the image indexes of
 * the calls whose answer said what it billed (their loss is that figure, not an estimate), and the
 * image indexes of accepted tasks that outlived the upstream's keeping of them (never polled to their end).
 */
export interface UpstreamLosses {
  billedUndelivered: number;
  billingReported?: number[];
  expiredCalls: number[];
}

/** What a generation's calls came to: its images or the error that ended it, and every attempt either way. */
export type ChannelRun =
  | { ok: true; images: ProviderImage[]; attempts: GenerationAttemptsTable[]; losses: UpstreamLosses }
  | { ok: false; error: unknown; attempts: GenerationAttemptsTable[]; losses: UpstreamLosses };

/**
 * An accepted task older than its format's `resume.lifeMs` (descriptor.ts): the upstream no longer
 * keeps it (the visual API answers `not_found` after 12 hours), so it is not polled again, nor sent
 * again. Not the channel's fault: it never counts against the breaker.
 */
export class TaskExpired extends ApiError {
  constructor(
    readonly imageIndex: number,
    taskId: string,
    lifeMs: number,
  ) {
    super(
      'provider_error',
      `Upstream task ${taskId} was accepted more than ${formatLife(lifeMs)} ago, longer than the upstream keeps a task; it is not polled nor sent again, and nothing was charged.`,
    );
  }
}

function formatLife(ms: number): string {
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : `${Math.round(ms / 60_000)} min`;
}

/**
 * What a durable generation records about its upstream calls, per image (src/generation): a call
 * is marked before it is sent, its task id stored once the upstream accepted it, and the mark
 * dropped when the call provably reached nothing. A takeover polls the stored task instead.
 */
export interface TaskJournal {
  /** The task of this image accepted earlier (by a process that died), to poll on its channel; `acceptedAt` (clock time) counts its life. */
  resume(imageIndex: number): { channelId: string; taskId: string; acceptedAt: number } | undefined;
  /** Before a call is sent; throws (and the call is not sent) when the generation may no longer send it. */
  sending(imageIndex: number, channelId: string): Promise<void>;
  accepted(imageIndex: number, channelId: string, taskId: string): Promise<void>;
  unsent(imageIndex: number): Promise<void>;
}

type FailoverDeps = Pick<ChannelRouterDeps, 'clock' | 'logger'>;

/**
 * Sends each call of a generation, failing it over between channels within the request's one
 * deadline while the upstream provably accepted nothing, and keeps every attempt for the record.
 */
export class ChannelFailover {
  constructor(
    private readonly deps: FailoverDeps,
    private readonly directory: ChannelDirectory,
    private readonly runtimes: ChannelRuntimes,
    private readonly waitLine: ChannelWaitLine,
  ) {}

  /**
   * Generates `request` for `entry` on its channels: one call per image on transports that make one
   * image per call, each routed (and failed over) on its own. Resolves with the attempt rows of
   * `generationId` on failure too (with the error, not thrown): their one writer is the caller, with
   * the generation's settlement.
   */
  async generate(generationId: string, entry: CatalogModel, request: ProviderRequest, clientSignal: AbortSignal, journal?: TaskJournal): Promise<ChannelRun> {
    const settings = this.runtimes.settingsOf(entry.provider);
    // The request's link of the abort chain: provider_timeout at the provider's deadline, the reason
    // the calls and the attempt rows see, or the client's (run's) reason when that comes first.
    const deadline = new AbortLink(clientSignal, { ms: settings.timeoutMs, reason: () => this.timeoutError(entry.provider, settings.timeoutMs) });
    const signal = deadline.signal;
    const context: RequestContext = {
      generationId,
      entry,
      settings,
      deadline: this.deps.clock.now() + settings.timeoutMs,
      signal,
      attempts: [],
      journal,
      losses: { billedUndelivered: 0, expiredCalls: [] },
    };
    const started = this.deps.clock.now();
    const stats = this.runtimes.statsOf(entry.provider);
    try {
      const split = request.n > 1 && callsOfEntry(entry, request.n) === request.n;
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
      const images = outcomes.flatMap((outcome) => (outcome as PromiseFulfilledResult<ProviderImage[]>).value);
      return { ok: true, images, attempts: attemptRows(generationId, context.attempts), losses: context.losses };
    } catch (error) {
      const failure = deadline.timedOut ? this.timeoutError(entry.provider, settings.timeoutMs) : error;
      const providerAtFault =
        failure instanceof UpstreamError ? failure.countsAgainstProvider : failure instanceof ApiError && failure.code === 'provider_timeout';
      stats.record(!providerAtFault, this.deps.clock.now() - started);
      return { ok: false, error: failure, attempts: attemptRows(generationId, context.attempts), losses: context.losses };
    } finally {
      deadline.release();
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
      const pick = await this.waitLine.acquire(context, request.n, failedOver, lastError);
      const { channel, client, leaseId } = pick;
      const journal = context.journal;
      try {
        // Another image of the request failed while this one waited for its channel: not sent.
        if (context.stopped !== undefined) throw context.stopped;
        // The journal refuses a call its generation may no longer send (canceled, or taken over).
        await journal?.sending(imageIndex, channel.id);
        if (context.signal.aborted) {
          // The request ended (client gone, canceled, deadline) before this call went out: it was not sent.
          await journal?.unsent(imageIndex);
          throw context.signal.reason;
        }
      } catch (error) {
        if (leaseId !== undefined) await this.release(channel, leaseId);
        throw error;
      }
      const runtime = this.runtimes.runtime(channel);
      const started = this.deps.clock.now();
      const remainingMs = context.deadline - started;
      const attemptMs = Math.max(1, Math.min(channel.timeoutMs, remainingMs));
      // A channel deadline that ends no earlier than the request's needs no timer or signal of its
      // own: the request's ends the attempt first (its timer was set first, for the same moment).
      const attemptDeadline =
        channel.timeoutMs < remainingMs
          ? new AbortLink(context.signal, { ms: attemptMs, reason: () => this.timeoutError(channel.provider, attemptMs) })
          : undefined;
      const attemptSignal = attemptDeadline ? attemptDeadline.signal : context.signal;
      let reached = false;
      runtime.inFlight += 1;
      try {
        const upstream = upstreamOn(channel, context.entry, request);
        const life = this.taskLife(context, imageIndex);
        const onTaskAccepted =
          (journal || life) &&
          (async (taskId: string) => {
            life?.accepted(taskId, this.deps.clock.now());
            await journal?.accepted(imageIndex, channel.id, taskId);
          });
        const onRequestSent = () => {
          reached = true;
        };
        const onBilled = (billedImages: number, deliveredImages: number) => {
          (context.losses.billingReported ??= []).push(imageIndex);
          if (billedImages === deliveredImages) return;
          this.deps.logger.warn(
            {
              generation_id: context.generationId,
              channel_id: channel.id,
              image_index: imageIndex,
              billed_images: billedImages,
              delivered_images: deliveredImages,
            },
            'upstream billed a different number of images than it delivered',
          );
          // Billed and not delivered: the operator's loss (charges.ts); delivered beyond the bill costs nobody.
          context.losses.billedUndelivered += Math.max(0, billedImages - deliveredImages);
        };
        const images = await client.generate(
          { ...request, ...upstream, onRequestSent, onBilled, ...(onTaskAccepted ? { onTaskAccepted } : {}), ...(life ? { beforePoll: life.check } : {}) },
          attemptSignal,
        );
        runtime.breaker.onSuccess();
        runtime.stats.record(true, this.deps.clock.now() - started);
        return this.delivered(context, imageIndex, channel, started, images);
      } catch (error) {
        const failure = attemptDeadline?.timedOut ? this.timeoutError(channel.provider, attemptMs) : withoutPrompt(error, request.prompt);
        if (failure instanceof TaskExpired) context.losses.expiredCalls.push(imageIndex);
        const moveOn = await this.judgeFailure(context, channel, runtime, failure, busyTries, failedOver, this.deps.clock.now() - started);
        context.attempts.push({
          imageIndex,
          channelId: channel.id,
          outcome: moveOn ? 'failed_over' : 'failed',
          errorCode: failure instanceof ApiError ? failure.code : 'internal_error',
          latencyMs: this.deps.clock.now() - started,
          startedAt: started,
        });
        if (!moveOn) {
          // The request ended (client gone, canceled) before the call was written to the upstream: it was not sent.
          // Forgetting its mark may fail (database down): the mark then stands and the call is charged as sent.
          if (context.signal.aborted && !reached) await context.journal?.unsent(imageIndex).catch(() => undefined);
          throw failure;
        }
        await context.journal?.unsent(imageIndex);
        lastError = failure as UpstreamError;
      } finally {
        attemptDeadline?.release();
        runtime.inFlight -= 1;
        if (leaseId !== undefined) await this.release(channel, leaseId);
      }
    }
  }

  /** A call's images, recorded as its succeeded attempt (with the tokens the upstream reported). */
  private delivered(context: RequestContext, imageIndex: number, channel: Channel, started: number, images: ProviderImage[]): ProviderImage[] {
    const usage = callUsage(images);
    context.attempts.push({
      imageIndex,
      channelId: channel.id,
      outcome: 'succeeded',
      errorCode: null,
      latencyMs: this.deps.clock.now() - started,
      startedAt: started,
      ...(usage ? { usage } : {}),
    });
    // The account's own host may serve its image URLs, whatever the provider's default host is.
    const sourceHost = hostOf(channel.baseUrl);
    return sourceHost === undefined ? images : images.map((image) => ({ ...image, sourceHost }));
  }

  /**
   * Polls a task a dead process had submitted, on the channel that accepted it: outside the
   * channel's limits (the work is already running upstream) and never sent anywhere else.
   */
  private async resumeCall(
    context: RequestContext,
    request: ProviderRequest,
    imageIndex: number,
    resume: { channelId: string; taskId: string; acceptedAt: number },
  ): Promise<ProviderImage[]> {
    const routable = (await this.directory.channels()).find((r) => r.channel.id === resume.channelId);
    if (!routable?.client) {
      throw new ApiError('provider_unavailable', `The channel that accepted task ${resume.taskId} is gone or cannot be opened; the task is not sent again.`);
    }
    const { channel, client } = routable;
    const started = this.deps.clock.now();
    try {
      const life = this.taskLife(context, imageIndex);
      life?.accepted(resume.taskId, resume.acceptedAt);
      const images = await client.generate(
        { ...request, ...upstreamOn(channel, context.entry, request), resumeTaskId: resume.taskId, ...(life ? { beforePoll: life.check } : {}) },
        context.signal,
      );
      return this.delivered(context, imageIndex, channel, started, images);
    } catch (caught) {
      const error = withoutPrompt(caught, request.prompt);
      if (error instanceof TaskExpired) context.losses.expiredCalls.push(imageIndex);
      const code = error instanceof ApiError ? error.code : 'internal_error';
      context.attempts.push({
        imageIndex,
        channelId: channel.id,
        outcome: 'failed',
        errorCode: code,
        latencyMs: this.deps.clock.now() - started,
        startedAt: started,
      });
      throw error;
    }
  }

  /**
   * The life of the task a call of a format with `resume.lifeMs` gets accepted as: `check` (asked
   * before each poll) ends the poll with TaskExpired once the task outlived it, by this process's
   * clock. Undefined for formats whose upstream does not say how long it keeps a task.
   */
  private taskLife(context: RequestContext, imageIndex: number): { accepted(taskId: string, at: number): void; check(): void } | undefined {
    const lifeMs = taskLifeOf(context.entry);
    if (lifeMs === undefined) return undefined;
    let task: { id: string; at: number } | undefined;
    return {
      accepted: (id, at) => {
        task = { id, at };
      },
      check: () => {
        if (task && this.deps.clock.now() - task.at >= lifeMs) throw new TaskExpired(imageIndex, task.id, lifeMs);
      },
    };
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
    if (upstream?.traits.accountProblem) await this.directory.autoDisable(channel, upstream);
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

  /** Every replica stops choosing the channel until `until` (the store's acquire checks it). */
  private async shareCoolDown(channel: Channel, until: number, now: number): Promise<void> {
    try {
      await this.runtimes.limitsOf(channel).coolDown(channel.id, until, now);
    } catch (error) {
      // This replica still honours it; the others learn of it from the account's next busy answer.
      this.deps.logger.warn({ err: error, channel_id: channel.id }, 'could not share a channel cool-down');
    }
  }

  private async release(channel: Channel, leaseId: string): Promise<void> {
    try {
      await this.runtimes.limitsOf(channel).release(channel.id, leaseId);
    } catch (error) {
      // The lease expires by itself.
      this.deps.logger.warn({ err: error, channel_id: channel.id }, 'could not release a channel slot');
    }
    this.waitLine.slotFreed();
  }
}

/**
 * The upstream id a channel serves the catalog model under (its own mapping, else the catalog's) and
 * the model family its format's table knows it by: a channel's own id (a BytePlus id, an endpoint
 * `ep-…`) is still the catalog model, so it keeps that model's family.
 */
function upstreamOn(channel: Channel, entry: CatalogModel, request: ProviderRequest): Pick<ProviderRequest, 'upstreamModel' | 'upstreamFamily'> {
  const mapped = channel.models.find((m) => m.model === entry.model)?.upstream_model;
  const family =
    request.upstreamFamily ??
    (mapped === undefined || mapped === request.upstreamModel ? undefined : familyOfEntry({ ...entry, upstream_model: request.upstreamModel }));
  return { upstreamModel: mapped ?? request.upstreamModel, ...(family === undefined ? {} : { upstreamFamily: family }) };
}

/** Hosts of the channels' base URLs, parsed once each (a URL parse was a visible part of every call). */
const hostsByBaseUrl = new Map<string, string | undefined>();

function hostOf(url: string | null): string | undefined {
  if (url === null) return undefined;
  if (hostsByBaseUrl.has(url)) return hostsByBaseUrl.get(url);
  let host: string | undefined;
  try {
    host = new URL(url).host;
  } catch {
    host = undefined;
  }
  // Base URLs are the channels' few; a bound all the same, for a process that sees many channels come and go.
  if (hostsByBaseUrl.size >= 1000) hostsByBaseUrl.clear();
  hostsByBaseUrl.set(url, host);
  return host;
}
