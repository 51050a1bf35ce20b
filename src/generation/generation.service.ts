import type { Logger } from 'pino';
import type { components } from '../../generated/gateway';
import type { CatalogModel } from '../config/catalog';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import type { ImagesService } from '../images/images.service';
import type { ConcurrencyLeases, HeldLease } from '../keys/concurrency-leases';
import { checkModelAllowed, holdConcurrencySlot } from '../keys/key-policy';
import type { ClientKey } from '../keys/key.model';
import { reserveCredits } from '../keys/keys.repository';
import { currentPeriodStart, periodEnd } from '../keys/quota-period';
import type { GatewayMetrics } from '../metrics/metrics';
import type { ProviderImage } from '../providers/provider';
import type { ProviderRegistry } from '../providers/registry';
import type { ChannelRouter } from '../channels/channel-router';
import type { RateLimitDecision, RateLimiter } from '../ratelimit/rate-limiter';
import { type Clock, toIso } from '../shared/clock';
import { newSortableId } from '../shared/ids';
import { emitQuotaEvents, emitQuotaExhausted } from '../webhooks/key-events';
import { completeGeneration, failGeneration, insertGeneration } from './generations.repository';

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
  /** Called when a failed generation could not be settled either, to release it once the database takes writes. */
  onUnsettled?: (generationId: string, errorCode: string) => void;
  images: ImagesService;
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
  constructor(private readonly deps: GenerationDeps) {}

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
        };
      }
    }
    if (!entry) {
      throw new ApiError('model_not_found', `Unknown model ${model}. Known models: ${[...catalog.keys()].join(', ')}.`, { param: 'model' });
    }
    return entry;
  }

  /** The gateway's path: a client key pays, within its rate limit and quota. */
  async generateForKey(key: ClientKey, input: GenerateImageInput, signal: AbortSignal): Promise<KeyGenerationOutcome> {
    const entry = this.modelFor(input.model);
    checkModelAllowed(key, entry.model);
    if (!key.allowedProviders.includes(entry.provider)) {
      throw new ApiError('provider_not_allowed', `This key may not use provider ${entry.provider} (allowed: ${key.allowedProviders.join(', ')}).`, {
        param: 'model',
      });
    }
    const decision = await this.deps.rateLimiter.consume(key.id, key.rateLimitRpm, this.deps.clock.now());
    let slot: HeldLease | undefined;
    try {
      if (!decision.allowed) {
        this.deps.metrics.rateLimitRefusals.inc();
        throw new ApiError('rate_limited', `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s.`, {
          headers: { 'Retry-After': String(decision.resetSeconds) },
        });
      }
      slot = await holdConcurrencySlot(this.deps.leases, key);
      const n = input.n ?? 1;
      const reservation = await this.reserve(key, entry, n);
      const outcome = await this.run(reservation.generationId, entry, input, signal, (error, latencyMs) =>
        this.release(key, reservation, error, latencyMs),
      );
      this.deps.metrics.creditsCharged.inc({ model: entry.model }, reservation.cost);
      return { ...outcome, credits: reservation.cost, creditsRemaining: reservation.creditsRemaining, rateLimit: decision };
    } catch (error) {
      // Refusals after the limiter still tell the client its rate-limit state.
      if (error instanceof ApiError) error.rateLimit ??= decision;
      throw error;
    } finally {
      await slot?.release();
    }
  }

  /** The internal API's path: a trusted service, no key, no quota; recorded for its client id. */
  async generateForService(clientId: string, input: GenerateImageInput & { provider?: string }, signal: AbortSignal): Promise<GenerationOutcome> {
    const entry = this.modelFor(input.model, input.provider);
    const { writes, clock } = this.deps;
    const generationId = newSortableId('gen', clock.now());
    const credits = (input.n ?? 1) * entry.credits_per_image;
    const row = {
      id: generationId,
      key_id: null,
      client_id: clientId,
      model: entry.model,
      provider: entry.provider,
      images: input.n ?? 1,
      credits,
      status: 'pending',
      error_code: null,
      latency_ms: null,
      period_started_at: clock.now(),
      created_at: clock.now(),
      completed_at: null,
      usage_epoch: null,
    };
    await writes.run((trx) => insertGeneration(trx, row));
    const outcome = await this.run(generationId, entry, input, signal, (error, latencyMs) => {
      const completedAt = clock.now();
      return writes.run((trx) => completeGeneration(trx, generationId, { status: 'failed', errorCode: errorCodeOf(error), latencyMs, completedAt }));
    });
    return { ...outcome, credits };
  }

  /** Calls the provider and settles the usage row; `onFailure` undoes the reservation. */
  private async run(
    generationId: string,
    entry: CatalogModel,
    input: GenerateImageInput,
    signal: AbortSignal,
    onFailure: (error: unknown, latencyMs: number) => Promise<unknown>,
  ): Promise<Omit<GenerationOutcome, 'credits'>> {
    const { clock, channels, metrics } = this.deps;
    const [width, height] = (input.size ?? entry.default_size).split('x').map(Number) as [number, number];
    const started = clock.now();
    try {
      const produced = await channels.generate(
        generationId,
        entry,
        {
          prompt: input.prompt,
          negativePrompt: input.negative_prompt,
          upstreamModel: entry.upstream_model,
          transport: entry.transport,
          upstreamOptions: entry.upstream_options,
          n: input.n ?? 1,
          width,
          height,
          seed: input.seed,
          responseFormat: input.response_format ?? 'url',
        },
        signal,
      );
      // Stored before success is recorded: an image the client cannot get is never charged.
      const responseFormat = input.response_format ?? 'url';
      const images = await this.deps.images.persist({ generationId, provider: entry.provider, images: produced, responseFormat }, signal);
      const latencyMs = elapsedMs(clock, started);
      const completedAt = clock.now();
      const settled = await this.deps.writes.run((trx) =>
        completeGeneration(trx, generationId, { status: 'succeeded', errorCode: null, latencyMs, completedAt }),
      );
      if (!settled) {
        // Only past its provider's deadline plus the sweep grace: the sweeper has already recorded it
        // failed/abandoned and given its credits back, so it stays that way (uncharged).
        this.deps.logger.warn({ generation_id: generationId }, 'generation finished after the sweeper had abandoned it');
      }
      metrics.generationSeconds.observe({ provider: entry.provider, outcome: 'succeeded' }, latencyMs / 1000);
      return { id: generationId, created: Math.floor(started / 1000), entry, images };
    } catch (error) {
      const latencyMs = elapsedMs(clock, started);
      metrics.generationSeconds.observe({ provider: entry.provider, outcome: 'failed' }, latencyMs / 1000);
      try {
        await onFailure(error, latencyMs);
      } catch (settleError) {
        // The row stays pending: released by a retry when the database is back, or by the sweeper.
        this.deps.logger.error({ err: settleError, generation_id: generationId }, 'could not settle a failed generation');
        this.deps.onUnsettled?.(generationId, errorCodeOf(error));
      }
      throw error;
    }
  }

  private async reserve(key: ClientKey, entry: CatalogModel, n: number) {
    const { writes, clock } = this.deps;
    const now = clock.now();
    const cost = n * entry.credits_per_image;
    const generationId = newSortableId('gen', now);
    // Reservation and its usage row commit together: a pending row always has credits behind it.
    // The period and book charged come from the key's row as the reservation found it, not from `key`.
    const reserved = await writes.run(async (trx) => {
      const row = await reserveCredits(trx, key.id, cost, now);
      if (!row) return undefined;
      // Threshold events commit with the reservation that crosses them, once per key, threshold and period.
      await emitQuotaEvents(trx, key, { used: row.credits_used, quota: row.credits_quota, cost, periodStart: row.period_started_at }, now);
      await insertGeneration(trx, {
        id: generationId,
        key_id: key.id,
        client_id: null,
        model: entry.model,
        provider: entry.provider,
        images: n,
        credits: cost,
        status: 'pending',
        error_code: null,
        latency_ms: null,
        period_started_at: row.period_started_at,
        created_at: now,
        completed_at: null,
        usage_epoch: row.usage_epoch,
      });
      return row;
    });
    if (!reserved) {
      // Only the message and the event read the key as the request found it.
      const periodStart = currentPeriodStart(key.createdAt, key.quotaPeriodDays, now);
      await writes.run((trx) => emitQuotaExhausted(trx, key, { used: null, quota: key.creditsQuota, periodStart }, now));
      const resetsAt = toIso(periodEnd(periodStart, key.quotaPeriodDays));
      throw new ApiError(
        'quota_exceeded',
        `This request needs ${cost} credits, more than is left of the key's quota of ${key.creditsQuota}; the quota refills at ${resetsAt}.`,
        { details: { period_resets_at: resetsAt } },
      );
    }
    return { generationId, cost, usageEpoch: reserved.usage_epoch, creditsRemaining: reserved.credits_quota - reserved.credits_used };
  }

  /** A failed generation is never charged: its credits go back to the book they came from, if it is still open. */
  private async release(key: ClientKey, reservation: { generationId: string; cost: number; usageEpoch: number }, error: unknown, latencyMs: number) {
    const { writes, clock } = this.deps;
    const completedAt = clock.now();
    await writes.run((trx) =>
      failGeneration(
        trx,
        { id: reservation.generationId, key_id: key.id, credits: reservation.cost, usage_epoch: reservation.usageEpoch },
        { errorCode: errorCodeOf(error), latencyMs, completedAt },
      ),
    );
  }
}

/** latency_ms is a 32-bit integer column: a clock that steps (NTP, a test clock) must not make settlement fail. */
function elapsedMs(clock: Clock, started: number): number {
  return Math.min(Math.max(clock.now() - started, 0), 2_147_483_647);
}

function errorCodeOf(error: unknown): string {
  return error instanceof ApiError ? error.code : 'internal_error';
}
