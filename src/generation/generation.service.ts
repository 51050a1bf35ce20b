import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { components } from '../../generated/gateway';
import type { ChannelRouter } from '../channels/channel-router';
import type { CatalogModel } from '../config/catalog';
import type { Database, GenerationsTable } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import { checkQuality } from '../config/price-table';
import { ApiError } from '../errors/api-error';
import type { ImagesService } from '../images/images.service';
import type { ImageOwner } from '../images/images.repository';
import type { CheckedInputs, InputImages, RequestedInputs, StoredInputs } from '../images/inputs/input-images';
import type { ConcurrencyLeases, HeldLease } from '../keys/concurrency-leases';
import { holdConcurrencySlot } from '../keys/key-policy';
import type { ClientKey } from '../keys/key.model';
import type { GatewayMetrics } from '../metrics/metrics';
import { modelSpecOfEntry } from '../providers/formats';
import { imageOptionsFor } from '../providers/model-spec';
import type { ProviderImageOptions } from '../providers/provider';
import type { ProviderRegistry } from '../providers/registry';
import { checkSize } from '../providers/upstream-models';
import type { RateLimitHolder, RateLimiter } from '../ratelimit/rate-limiter';
import type { Clock } from '../shared/clock';
import { newSortableId } from '../shared/ids';
import type { WebhookSecrets } from '../webhooks/secret-sealing';
import { GenerationAdmission } from './admission';
import type { GenerationOutcome } from './generation-outcome';
import { ClientGenerations } from './client-generations';
import type { CompletionWebhooks } from './completion-webhooks';
import { type StoredGenerationRequest, upstreamFieldsOf } from './durable';
import { requestFallbacks } from './fallback-chain';
import { reservedCredits } from './charges';
import type { GenerationResources } from './generation-resource';
import type { GenerationRunner } from './generation-runner';
import type { GenerationWorker } from './generation-worker';
import { LeaseLost } from './lease';
import { countQueuedGenerations, findGeneration, insertGeneration } from './generations.repository';
import { Reservations } from './reservations';
import type { CursorCodec } from '../shared/cursor';

export type GenerateImageInput = components['schemas']['GenerateImageRequest'];
/**
 * A generation request as the handlers pass it: the JSON API's fields, inputs also as uploaded files'
 * bytes (OpenAI edits), and the OpenAI request's output options besides `quality` (`background`, …).
 */
export type GenerationInput = Omit<GenerateImageInput, 'images' | 'mask'> & RequestedInputs & { image_options?: ProviderImageOptions };
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
  /** Reads, checks and stores a request's input images (before its reservation). */
  inputs: InputImages;
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
  /** Signs and opens the generation lists' page cursors. */
  cursors: CursorCodec;
}

export interface KeyGenerationOutcome extends GenerationOutcome {
  /** Credits left on the key in this period, after this charge. */
  creditsRemaining: number;
  /** The price of each image of the request (price-table.ts). */
  creditsPerImage: number;
}

/** What the gateway's and the internal API's generation responses share (all but `usage`). */
export function generationSummary(outcome: GenerationOutcome): Omit<GenerateImageResult, 'usage'> {
  return {
    id: outcome.id,
    created: outcome.created,
    model: outcome.entry.model,
    requested_model: outcome.requestedModel,
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
  readonly admission: GenerationAdmission;
  readonly reservations: Reservations;
  readonly runner: GenerationRunner;
  readonly resources: GenerationResources;
  /** The key holder's view of its generations (GET, list, cancel). */
  readonly clients: ClientGenerations;
  readonly completionWebhooks: CompletionWebhooks | undefined;
  /** For the webhook secret operation (read or created on first use). */
  get db(): Kysely<Database> {
    return this.deps.db;
  }

  get cursors(): CursorCodec {
    return this.deps.cursors;
  }

  constructor(
    private readonly deps: GenerationDeps,
    parts: { runner: GenerationRunner; resources: GenerationResources; completionWebhooks: CompletionWebhooks | undefined },
  ) {
    const { db, writes, clock } = deps;
    ({ runner: this.runner, resources: this.resources, completionWebhooks: this.completionWebhooks } = parts);
    const hooks = parts.completionWebhooks;
    this.admission = new GenerationAdmission(deps);
    this.reservations = new Reservations({
      db,
      writes,
      clock,
      owner: deps.worker.owner,
      leaseMs: deps.leaseMs,
      ...(deps.onUnsettled ? { onUnsettled: deps.onUnsettled } : {}),
      ...(deps.databaseBudgetMs !== undefined ? { databaseBudgetMs: deps.databaseBudgetMs } : {}),
    });
    this.clients = new ClientGenerations({
      db,
      writes,
      clock,
      cursors: deps.cursors,
      resources: parts.resources,
      worker: deps.worker,
      ...(hooks ? { onSettled: (trx, id) => hooks.emit(trx, id), afterSettled: () => hooks.poke() } : {}),
    });
  }

  /** The request's completion webhook, checked; its key's signing secret exists before any delivery needs it. */
  private async webhookOf(key: ClientKey, input: GenerationInput) {
    if (input.webhook === undefined && input.webhook_events_filter === undefined) return undefined;
    if (!this.completionWebhooks) throw new ApiError('invalid_request', 'Completion webhooks are not available here.', { param: 'webhook' });
    const webhook = this.completionWebhooks.validate(input);
    if (webhook) await this.completionWebhooks.secretFor(this.deps.db, key.id);
    return webhook;
  }

  /** The gateway's path: a client key pays, within its rate limit and quota. `rateLimit` receives the count's decision. */
  async generateForKey(key: ClientKey, input: GenerationInput, signal: AbortSignal, rateLimit?: RateLimitHolder): Promise<KeyGenerationOutcome> {
    const { entry, decision } = await this.admission.admitForKey(key, input.model, rateLimit);
    let slot: HeldLease | undefined;
    try {
      this.admission.refuseOverLimit(decision);
      const webhook = await this.webhookOf(key, input);
      const request = this.storedRequest(entry, input, false);
      const checked = await this.checkInputs({ kind: 'key', id: key.id }, entry, input, signal);
      const fallbacks = this.fallbacksOf(entry, input, request, checked, key);
      slot = await holdConcurrencySlot(this.deps.leases, key);
      // Stored only once the request holds its slot: a request refused for concurrency stores nothing.
      const { generationId, inputs } = await this.keepInputs(checked);
      const n = input.n ?? 1;
      const stored = { ...request, ...fallbacks, ...(inputs ? { inputs } : {}), ...(webhook ? { webhook } : {}) };
      const reservation = await this.reservations.reserve(key, entry, n, stored, true, generationId);
      const outcome = await this.runHeld(reservation.row, signal, stored);
      // Charged the price of the model that delivered; the rest of the reservation went back to the key.
      return { ...outcome, creditsPerImage: outcome.credits / n, creditsRemaining: reservation.creditsRemaining + reservation.cost - outcome.credits };
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
  async submitForKey(key: ClientKey, input: GenerationInput, rateLimit?: RateLimitHolder): Promise<{ row: GenerationsTable; creditsRemaining: number }> {
    const { entry, decision } = await this.admission.admitForKey(key, input.model, rateLimit);
    this.admission.refuseOverLimit(decision);
    const queued = await countQueuedGenerations(this.deps.db, key.id);
    if (queued >= this.deps.maxQueuedPerKey) {
      throw new ApiError('too_many_queued_generations', `This key already has ${queued} generations queued; retry when some have started.`, {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(this.deps.pollMs / 1000))) },
      });
    }
    const webhook = await this.webhookOf(key, input);
    const request = this.storedRequest(entry, input, true);
    const checked = await this.checkInputs({ kind: 'key', id: key.id }, entry, input);
    const fallbacks = this.fallbacksOf(entry, input, request, checked, key);
    const { generationId, inputs } = await this.keepInputs(checked);
    const stored = { ...request, ...fallbacks, ...(inputs ? { inputs } : {}), ...(webhook ? { webhook } : {}) };
    const reservation = await this.reservations.reserve(key, entry, input.n ?? 1, stored, false, generationId);
    this.deps.worker.wake();
    return { row: reservation.row, creditsRemaining: reservation.creditsRemaining };
  }

  /** The internal API's path: a trusted service, no key, no quota; recorded for its client id. */
  async generateForService(clientId: string, input: GenerationInput & { provider?: string }, signal: AbortSignal): Promise<GenerationOutcome> {
    if (input.webhook !== undefined || input.webhook_events_filter !== undefined) {
      throw new ApiError('invalid_request', 'Completion webhooks belong to client keys; the internal API has none.', { param: 'webhook' });
    }
    const entry = this.admission.modelFor(input.model, input.provider);
    const { writes, clock } = this.deps;
    const now = clock.now();
    const request = this.storedRequest(entry, input, false);
    const checked = await this.checkInputs({ kind: 'service', id: clientId }, entry, input, signal);
    const { generationId, inputs } = await this.keepInputs(checked);
    const stored = { ...request, ...this.fallbacksOf(entry, input, request, checked), ...(inputs ? { inputs } : {}) };
    // Recorded, not charged: the same rule as a key's reservation, re-priced at settlement.
    const credits = reservedCredits(stored);
    const row: GenerationsTable = {
      ...this.reservations.heldRow(now),
      id: generationId,
      key_id: null,
      client_id: clientId,
      model: entry.model,
      provider: entry.provider,
      images: input.n ?? 1,
      credits,
      period_started_at: now,
      created_at: now,
      usage_epoch: null,
      request: JSON.stringify(stored),
    };
    await writes.run((trx) => insertGeneration(trx, row));
    return this.runHeld(row, signal, stored);
  }

  /** The request's input images, read and checked against the model's limits: the 4xx refusals, before anything is stored or reserved. */
  private checkInputs(owner: ImageOwner, entry: CatalogModel, input: GenerationInput, signal?: AbortSignal) {
    return this.deps.inputs.intake(owner, entry.model, entry.input_limits, input, signal);
  }

  /**
   * The checked inputs stored under the generation's id, chosen here so the reservation that
   * follows uses it; a reservation refused after this leaves the stored inputs to expire unseen.
   */
  private async keepInputs(checked: CheckedInputs | undefined): Promise<{ generationId: string; inputs?: StoredInputs }> {
    const generationId = newSortableId('gen', this.deps.clock.now());
    return { generationId, ...(checked ? { inputs: await this.deps.inputs.keep(generationId, checked) } : {}) };
  }

  /** The request's fallbacks (fallback-chain.ts), as the stored request keeps them: absent when none. */
  private fallbacksOf(
    entry: CatalogModel,
    input: GenerationInput,
    request: StoredGenerationRequest,
    inputs: CheckedInputs | undefined,
    key?: ClientKey,
  ): Pick<StoredGenerationRequest, 'fallbacks'> {
    const { width, height, quality } = request.request;
    const fallbacks = requestFallbacks(entry, this.deps.catalog, { wanted: input.fallback, width, height, quality, inputs, ...(key ? { key } : {}) });
    return fallbacks.length > 0 ? { fallbacks } : {};
  }

  /** What a worker needs to run the generation later, on any replica. */
  private storedRequest(entry: CatalogModel, input: GenerationInput, background: boolean): StoredGenerationRequest {
    const [width, height] = (input.size ?? entry.default_size).split('x').map(Number) as [number, number];
    // Refused here, before the reservation: a size, quality or output option the upstream would refuse is never charged nor sent.
    checkSize(entry.model, width, height, entry.size_bounds);
    checkQuality(entry, input.quality);
    const quality = input.quality !== undefined && input.quality !== 'auto' ? input.quality : undefined;
    const withInputs = (input.images?.length ?? 0) > 0 || input.mask !== undefined;
    imageOptionsFor(entry.model, modelSpecOfEntry(entry), { ...input.image_options, ...(quality !== undefined ? { quality } : {}) }, withInputs);
    return {
      entry,
      keep_base64: background,
      mark_sends: background,
      request: {
        prompt: input.prompt,
        ...(input.negative_prompt !== undefined ? { negativePrompt: input.negative_prompt } : {}),
        ...upstreamFieldsOf(entry),
        n: input.n ?? 1,
        width,
        height,
        ...(input.seed !== undefined ? { seed: input.seed } : {}),
        ...(quality !== undefined ? { quality } : {}),
        // As the client gave them: each wire client sends those its model takes.
        ...(input.image_options !== undefined ? { imageOptions: input.image_options } : {}),
        responseFormat: input.response_format ?? 'url',
      },
    };
  }

  /** Runs a row this process holds, for a client awaiting it; its disconnect aborts (fails and releases) the run. */
  private async runHeld(row: GenerationsTable, signal: AbortSignal, stored: StoredGenerationRequest): Promise<GenerationOutcome> {
    try {
      return await this.deps.worker.holdLocal(row, signal, (held, runSignal) => this.runner.execute(held, runSignal, stored));
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
}
