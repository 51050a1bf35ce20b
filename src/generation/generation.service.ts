import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { components } from '../../generated/gateway';
import type { CatalogModel } from '../config/catalog';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import type { ApiKeyRow } from '../keys/key.model';
import { releaseCredits, reserveCredits } from '../keys/keys.repository';
import { currentPeriodStart, periodEnd } from '../keys/quota-period';
import type { ProviderRegistry } from '../providers/registry';
import type { RateLimitDecision, RateLimiter } from '../ratelimit/rate-limiter';
import { type Clock, toIso } from '../shared/clock';
import { newId } from '../shared/ids';
import { completeGeneration, insertGeneration } from './generations.repository';

export type GenerateImageInput = components['schemas']['GenerateImageRequest'];
export type GenerateImageResult = components['schemas']['GenerateImageResponse'];

export interface GenerationDeps {
  db: Kysely<Database>;
  clock: Clock;
  catalog: ReadonlyMap<string, CatalogModel>;
  providers: ProviderRegistry;
  rateLimiter: RateLimiter;
  logger: Logger;
}

/**
 * Generation with exact accounting: checks model and provider, counts the request against
 * the key's RPM, reserves credits atomically, calls the provider, then settles the usage
 * row or releases the credits. A refused request is never charged.
 */
export class GenerationService {
  constructor(private readonly deps: GenerationDeps) {}

  async generate(
    key: ApiKeyRow,
    input: GenerateImageInput,
    signal: AbortSignal,
    onRateLimit: (decision: RateLimitDecision) => void,
  ): Promise<GenerateImageResult> {
    const { clock, catalog, providers } = this.deps;
    const entry = catalog.get(input.model);
    if (!entry) {
      throw new ApiError('model_not_found', `Unknown model ${input.model}. Known models: ${[...catalog.keys()].join(', ')}.`, {
        param: 'model',
      });
    }
    const allowed = JSON.parse(key.allowed_providers) as string[];
    if (!allowed.includes(entry.provider)) {
      throw new ApiError('provider_not_allowed', `This key may not use provider ${entry.provider} (allowed: ${allowed.join(', ')}).`, {
        param: 'model',
      });
    }
    const provider = providers.get(entry.provider);
    if (!provider) throw new ApiError('provider_unavailable', `Provider ${entry.provider} is not configured.`, { param: 'model' });

    const decision = await this.deps.rateLimiter.consume(key.id, key.rate_limit_rpm, clock.now());
    onRateLimit(decision);
    if (!decision.allowed) {
      throw new ApiError(
        'rate_limited',
        `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s.`,
        { headers: { 'Retry-After': String(decision.resetSeconds) } },
      );
    }

    const n = input.n ?? 1;
    const [width, height] = (input.size ?? entry.default_size).split('x').map(Number) as [number, number];
    const reservation = await this.reserve(key, entry, n);
    const started = clock.now();
    try {
      const images = await provider.generate(
        {
          prompt: input.prompt,
          negativePrompt: input.negative_prompt,
          upstreamModel: entry.upstream_model,
          n,
          width,
          height,
          seed: input.seed,
          responseFormat: input.response_format ?? 'url',
          transport: entry.transport,
        },
        signal,
      );
      await completeGeneration(this.deps.db, reservation.generationId, {
        status: 'succeeded',
        errorCode: null,
        latencyMs: clock.now() - started,
        completedAt: clock.now(),
      });
      return {
        id: reservation.generationId,
        created: Math.floor(started / 1000),
        model: entry.model,
        provider: entry.provider,
        data: images.map((image) => ({
          ...(image.url !== undefined ? { url: image.url } : {}),
          ...(image.b64Json !== undefined ? { b64_json: image.b64Json } : {}),
          width: image.width,
          height: image.height,
        })),
        usage: { images: images.length, credits_charged: reservation.cost, credits_remaining: reservation.creditsRemaining },
      };
    } catch (error) {
      await this.release(key, reservation, error, clock.now() - started);
      throw error;
    }
  }

  private async reserve(key: ApiKeyRow, entry: CatalogModel, n: number) {
    const { db, clock } = this.deps;
    const now = clock.now();
    const cost = n * entry.credits_per_image;
    const periodStart = currentPeriodStart(key.created_at, key.quota_period_days, now);
    const generationId = newId('gen');
    // Reservation and its usage row commit together: a pending row always has credits behind it.
    const reserved = await db.transaction().execute(async (trx) => {
      const row = await reserveCredits(trx, key.id, cost, periodStart, now);
      if (!row) return undefined;
      await insertGeneration(trx, {
        id: generationId,
        key_id: key.id,
        model: entry.model,
        provider: entry.provider,
        images: n,
        credits: cost,
        status: 'pending',
        error_code: null,
        latency_ms: null,
        period_started_at: periodStart,
        created_at: now,
        completed_at: null,
      });
      return row;
    });
    if (!reserved) {
      const resetsAt = toIso(periodEnd(periodStart, key.quota_period_days));
      throw new ApiError('quota_exceeded', `This request needs ${cost} credits, which exceeds what is left of the key's quota of ${key.credits_quota}; the quota refills at ${resetsAt}.`, {
        details: { period_resets_at: resetsAt },
      });
    }
    return { generationId, cost, periodStart, creditsRemaining: reserved.credits_quota - reserved.credits_used };
  }

  private async release(key: ApiKeyRow, reservation: { generationId: string; cost: number; periodStart: number }, error: unknown, latencyMs: number) {
    const { db, clock, logger } = this.deps;
    const errorCode = error instanceof ApiError ? error.code : 'internal_error';
    try {
      await db.transaction().execute(async (trx) => {
        await releaseCredits(trx, key.id, reservation.cost, reservation.periodStart);
        await completeGeneration(trx, reservation.generationId, { status: 'failed', errorCode, latencyMs, completedAt: clock.now() });
      });
    } catch (releaseError) {
      // Leave the row pending: the startup sweep releases stale reservations.
      logger.error({ err: releaseError, generation_id: reservation.generationId }, 'could not release reserved credits');
    }
  }
}
