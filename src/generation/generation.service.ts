import type { components } from '../../generated/gateway';
import type { ChannelRouter } from '../channels/channel-router';
import type { CatalogModel } from '../config/catalog';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database, GenerationsTable } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import { checkQuality } from '../config/price-table';
import { ApiError } from '../errors/api-error';
import type { ModerationColumns, ProjectModeration } from '../guardrails/project-moderation';
import { asSent } from '../guardrails/prompt-rules';
import type { ImagesService } from '../images/images.service';
import type { ImageOwner } from '../images/images.repository';
import type { CheckedInputs, InputImages, RequestedInputs, StoredInputs } from '../images/inputs/input-images';
import type { ConcurrencyLeases, HeldLease } from '../keys/concurrency-leases';
import { checkPromptRules, holdConcurrencySlot } from '../keys/key-policy';
import type { ClientKey } from '../keys/key.model';
import type { GatewayMetrics } from '../metrics/metrics';
import { modelSpecOfEntry } from '../providers/formats';
import { checkPromptLength, imageOptionsFor } from '../providers/model-spec';
import type { ProviderImageOptions } from '../providers/provider';
import type { ProviderRegistry } from '../providers/registry';
import { checkSize } from '../providers/upstream-models';
import { addBlockedRequestUsage } from '../usage/usage-rollups.repository';
import type { RateLimiter } from '../ratelimit/rate-limiter';
import type { Clock } from '../shared/clock';
import { newSortableId } from '../shared/ids';
import type { WebhookSecrets } from '../webhooks/secret-sealing';
import { GenerationAdmission } from './admission';
import type { GenerationOutcome } from './generation-outcome';
import type { CompletionWebhooks, GenerationWebhook } from './completion-webhooks';
import { type StoredGenerationRequest, upstreamFieldsOf } from './durable';
import { requestFallbacks } from './fallback-chain';
import type { GenerationRunner } from './generation-runner';
import { GenerationSteps, type Undo } from './generation-steps';
import type { GenerationWorker } from './generation-worker';
import { countQueuedGenerations, findGeneration } from './generations.repository';
import { LeaseLost } from './lease';
import type { Unbilled } from './settlement.repository';
import { Reservations } from './reservations';
import { currentTraceparent } from '../telemetry/tracing';
import { ClientDisconnected } from '../http/abort-on-disconnect';
import { errorCodeOf, logGenerationFailure, wasLogged } from './failure-log';

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
  onUnsettled?: (generationId: string, errorCode: string, mayAppear?: boolean, unbilled?: Unbilled) => void;
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
  /** Runs the rows this service holds for their waiting clients. */
  runner: GenerationRunner;
  /** Projects' moderation hooks (src/guardrails/project-moderation.ts); without it no hook is asked. */
  moderation?: ProjectModeration;
}

type Reservation = Awaited<ReturnType<Reservations['reserve']>>;

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

/** What every generation path starts from: the request, whose inputs it owns, and whether it runs in the background. */
interface Asked {
  input: GenerationInput;
  owner: ImageOwner;
  /** Submitted asynchronously: run later by a worker (durable.ts: keep_base64, mark_sends). */
  background: boolean;
  /** The waiting client's disconnect; none for a queued request. */
  signal: AbortSignal | undefined;
  /** The id of the request that asked (kept with the generation for its failure log line). */
  requestId?: string | undefined;
}

/** A client key's request. */
interface KeyAsked extends Asked {
  key: ClientKey;
}

/** A request whose client waits for its images: its disconnect aborts the run. */
interface Waiting {
  signal: AbortSignal;
}

/** What the reservation step writes: the generation row and its stored request. */
interface Recorded {
  row: GenerationsTable;
  stored: StoredGenerationRequest;
}

const CHECK: Undo<object> = { by: 'nothing: a check writes nothing' };
const KEPT_INPUTS: Undo<object> = { by: 'the image store: inputs no generation names expire unseen' };
const MODERATED: Undo<object> = { by: 'nothing: the hook was asked, nothing was taken' };
const RESERVED: Undo<object> = { by: "the run's settlement: a failure releases what it did not charge" };

/**
 * Generation with exact accounting, as three paths of named steps (generation-steps.ts). For a
 * client key: model and provider checks, the key's RPM, an atomic credit reservation, the provider
 * call, then settlement or release. For an internal service: no key, no quota, the usage row records
 * the service. A refused request is never charged.
 */
export class GenerationService {
  private readonly admission: GenerationAdmission;
  private readonly reservations: Reservations;

  /** The gateway's synchronous path: its client waits for the images. */
  private readonly keySync = GenerationSteps.from<KeyAsked & Waiting>()
    .then('admit', (s) => this.admitKey(s), { by: "nothing: the request counts against its key's RPM, as every request does" })
    .then('check webhook', (s) => this.checkWebhook(s), { by: "nothing: the key's signing secret stays for its later requests" })
    .then('check request', (s) => this.checkRequest(s), CHECK)
    .then('check inputs', (s) => this.checkInputs(s), CHECK)
    .then('choose fallbacks', (s) => this.chooseFallbacks(s), CHECK)
    .then('moderate', (s) => this.moderate(s), MODERATED)
    // Before the inputs are stored: a request refused for concurrency stores nothing.
    .then('hold slot', (s) => this.holdSlot(s), { release: async ({ slot }) => slot?.release() })
    .then('keep inputs', (s) => this.keepInputs(s), KEPT_INPUTS)
    .then('reserve', (s) => this.reserve(s), RESERVED)
    .then('run', (s) => this.run(s), { by: 'nothing: the run settles itself' });

  /**
   * The asynchronous path (`Prefer: respond-async`): the same checks and reservation at once (a
   * refusal is answered now with today's codes), plus a cap on the key's queued generations; the
   * generation is queued and a worker (this process's first: woken now) runs it when its model's
   * channels have room. The key's max_concurrent bounds synchronous requests only.
   */
  private readonly keyAsync = GenerationSteps.from<KeyAsked>()
    .then('admit', (s) => this.admitKey(s), { by: "nothing: the request counts against its key's RPM, as every request does" })
    .then('cap queue', (s) => this.capQueue(s), CHECK)
    .then('check webhook', (s) => this.checkWebhook(s), { by: "nothing: the key's signing secret stays for its later requests" })
    .then('check request', (s) => this.checkRequest(s), CHECK)
    .then('check inputs', (s) => this.checkInputs(s), CHECK)
    .then('choose fallbacks', (s) => this.chooseFallbacks(s), CHECK)
    // Decided at admission, before the row is queued: a blocked request never waits for a worker.
    .then('moderate', (s) => this.moderate(s), MODERATED)
    .then('keep inputs', (s) => this.keepInputs(s), KEPT_INPUTS)
    .then('reserve', (s) => this.reserve(s), RESERVED)
    .then('wake worker', () => this.deps.worker.wake(), { by: 'nothing: a wake claims only what has room' });

  /** The internal API's path: a trusted service, no key, no quota; recorded for its client id. */
  private readonly service = GenerationSteps.from<Asked & Waiting & { input: { provider?: string } }>()
    .then('refuse webhook', (s) => refuseServiceWebhook(s), CHECK)
    .then('choose model', ({ input }) => ({ entry: this.admission.modelFor(input.model, input.provider) }), CHECK)
    .then('check request', (s) => this.checkRequest(s), CHECK)
    .then('check inputs', (s) => this.checkInputs(s), CHECK)
    .then('keep inputs', (s) => this.keepInputs(s), KEPT_INPUTS)
    .then('choose fallbacks', (s) => this.chooseFallbacks(s), CHECK)
    .then('record', (s) => this.record(s), RESERVED)
    .then('run', (s) => this.run(s), { by: 'nothing: the run settles itself' });

  constructor(
    private readonly deps: GenerationDeps,
    readonly completionWebhooks: CompletionWebhooks | undefined,
  ) {
    this.admission = new GenerationAdmission(deps);
    this.reservations = new Reservations({
      db: deps.db,
      writes: deps.writes,
      clock: deps.clock,
      owner: deps.worker.owner,
      leaseMs: deps.leaseMs,
      ...(deps.onUnsettled ? { onUnsettled: deps.onUnsettled } : {}),
      ...(deps.databaseBudgetMs !== undefined ? { databaseBudgetMs: deps.databaseBudgetMs } : {}),
    });
  }

  /** The gateway's path: a client key pays, within its rate limit and quota. */
  async generateForKey(key: ClientKey, input: GenerationInput, signal: AbortSignal, requestId?: string): Promise<KeyGenerationOutcome> {
    const asked = { key, input: asSent(input), signal, owner: { kind: 'key', id: key.id }, background: false, requestId } as const;
    const { outcome, reservation } = await this.keySync.run(asked).catch((error: unknown) => this.refused(asked, error));
    // Charged what was delivered, priced on the model that delivered it; the rest of the reservation went back to the key.
    return {
      ...outcome,
      creditsPerImage: outcome.credits / Math.max(1, outcome.images.length),
      creditsRemaining: reservation.creditsRemaining + reservation.cost - outcome.credits,
    };
  }

  /** See `keyAsync`. */
  async submitForKey(key: ClientKey, input: GenerationInput, requestId?: string): Promise<{ row: GenerationsTable; creditsRemaining: number }> {
    const asked = { requestId, key, input: asSent(input), signal: undefined, owner: { kind: 'key', id: key.id }, background: true } as const;
    const { row, reservation } = await this.keyAsync.run(asked).catch((error: unknown) => this.refused(asked, error));
    return { row, creditsRemaining: reservation.creditsRemaining };
  }

  /** See `service`. */
  async generateForService(
    clientId: string,
    input: GenerationInput & { provider?: string },
    signal: AbortSignal,
    requestId?: string,
  ): Promise<GenerationOutcome> {
    const asked = { input: asSent(input), signal, owner: { kind: 'service', id: clientId }, background: false, requestId } as const;
    return (await this.service.run(asked).catch((error: unknown) => this.refused(asked, error))).outcome;
  }

  /**
   * The one log line of a request that ended without its images and whose run did not log it
   * already (failure-log.ts): a refusal at admission, a check, moderation, the reservation.
   */
  private refused(asked: Asked & { key?: ClientKey }, error: unknown): never {
    if (!wasLogged(error) && !(error instanceof ClientDisconnected)) {
      const entry = this.deps.catalog.get(asked.input.model);
      logGenerationFailure(
        this.deps.logger,
        {
          request_id: asked.requestId,
          generation_id: undefined,
          key_id: asked.key?.id ?? null,
          project_id: asked.key?.project?.id ?? null,
          model: asked.input.model,
          provider: entry?.provider,
          channel_id: undefined,
          error_code: errorCodeOf(error),
        },
        error,
        'generation refused',
      );
    }
    throw error;
  }

  /**
   * The model and provider checks, then the key's RPM, refused past it, then the key's prompt rules
   * (a refused prompt still counts as a request, and in usage analytics as blocked).
   */
  private async admitKey({ key, input }: KeyAsked): Promise<{ entry: CatalogModel }> {
    const entry = await this.admission.admitForKey(key, input.model);
    try {
      checkPromptRules(key.policy, input.prompt);
    } catch (error) {
      if (error instanceof ApiError && error.code === 'prompt_blocked') await this.recordBlocked(key, entry, error.code);
      throw error;
    }
    return { entry };
  }

  /**
   * The key's project's moderation hook, when it has one (the hook came with the key's row: a key
   * without one costs nothing here): once the request's own checks passed, before anything is held,
   * stored or reserved. A block, or a failure under fail_closed, counts in usage analytics as blocked.
   */
  private async moderate(s: KeyAsked & { entry: CatalogModel; checked: CheckedInputs | undefined }): Promise<{ moderation: ModerationColumns | undefined }> {
    const { key, entry, input, checked } = s;
    if (!this.deps.moderation || key.project === null || key.project.moderationHook === null) return { moderation: undefined };
    const inputs = checked ? [...checked.images, ...(checked.mask ? [checked.mask] : [])].map((image) => image.bytes) : [];
    try {
      return {
        moderation: await this.deps.moderation.check(key.project, { keyId: key.id, requestId: s.requestId, model: entry.model, prompt: input.prompt, inputs }),
      };
    } catch (error) {
      if (error instanceof ApiError && (error.code === 'moderation_blocked' || error.code === 'moderation_unavailable'))
        await this.recordBlocked(key, entry, error.code);
      throw error;
    }
  }

  /** A guardrail's refusal in the usage rollups; a failure to record it is logged, and the refusal answered as it is. */
  private async recordBlocked(key: ClientKey, entry: CatalogModel, errorCode: string): Promise<void> {
    const blocked = { keyId: key.id, model: entry.model, provider: entry.provider, errorCode, at: this.deps.clock.now() };
    try {
      await this.deps.writes.single((db) => addBlockedRequestUsage(db, blocked));
    } catch (error) {
      this.deps.logger.warn({ err: error, keyId: key.id, errorCode }, 'A blocked request could not be added to the usage rollups');
    }
  }

  /** A key's queued generations stay under MAX_QUEUED_GENERATIONS_PER_KEY. */
  private async capQueue({ key }: { key: ClientKey }): Promise<void> {
    const queued = await countQueuedGenerations(this.deps.db, key.id);
    if (queued >= this.deps.maxQueuedPerKey) {
      throw new ApiError('too_many_queued_generations', `This key already has ${queued} generations queued; retry when some have started.`, {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(this.deps.pollMs / 1000))) },
      });
    }
  }

  /** The request's completion webhook, checked; its key's signing secret exists before any delivery needs it. */
  private async checkWebhook({ key, input }: KeyAsked): Promise<{ webhook: GenerationWebhook | undefined }> {
    if (input.webhook === undefined && input.webhook_events_filter === undefined) return { webhook: undefined };
    if (!this.completionWebhooks) throw new ApiError('invalid_request', 'Completion webhooks are not available here.', { param: 'webhook' });
    const webhook = this.completionWebhooks.validate(input);
    if (webhook) await this.completionWebhooks.secretFor(key.id);
    return { webhook };
  }

  /** What a worker needs to run the generation later, on any replica; a size, quality or output option the upstream would refuse is refused here. */
  private checkRequest({ entry, input, background, requestId }: Asked & { entry: CatalogModel }): { request: StoredGenerationRequest } {
    const request = storedRequestFor(entry, input, background);
    if (requestId === undefined) return { request };
    const traceparent = currentTraceparent();
    return { request: { ...request, origin: { request_id: requestId, ...(traceparent !== undefined ? { traceparent } : {}) } } };
  }

  /** The request's input images, read and checked against the model's limits: the 4xx refusals, before anything is stored or reserved. */
  private async checkInputs({ owner, entry, input, signal }: Asked & { entry: CatalogModel }): Promise<{ checked: CheckedInputs | undefined }> {
    return { checked: await this.deps.inputs.intake(owner, entry.model, entry.input_limits, input, signal) };
  }

  /** The request's fallbacks (fallback-chain.ts), as the stored request keeps them: absent when none. */
  private chooseFallbacks(s: Asked & { entry: CatalogModel; request: StoredGenerationRequest; checked: CheckedInputs | undefined; key?: ClientKey }): {
    fallbacks: Pick<StoredGenerationRequest, 'fallbacks'>;
  } {
    const { width, height, quality } = s.request.request;
    const fallbacks = requestFallbacks(s.entry, this.deps.catalog, {
      wanted: s.input.fallback,
      width,
      height,
      quality,
      inputs: s.checked,
      ...(s.key ? { key: s.key } : {}),
    });
    return { fallbacks: fallbacks.length > 0 ? { fallbacks } : {} };
  }

  private async holdSlot({ key }: { key: ClientKey }): Promise<{ slot: HeldLease | undefined }> {
    return { slot: await holdConcurrencySlot(this.deps.leases, key) };
  }

  /**
   * The checked inputs stored under the generation's id, chosen here so the reservation that
   * follows uses it; a reservation refused after this leaves the stored inputs to expire unseen.
   */
  private async keepInputs({ checked }: { checked: CheckedInputs | undefined }): Promise<{ generationId: string; inputs: StoredInputs | undefined }> {
    const generationId = newSortableId('gen', this.deps.clock.now());
    return { generationId, inputs: checked ? await this.deps.inputs.keep(generationId, checked) : undefined };
  }

  /** The key's credits and the generation row, at once: held by this process (synchronous) or queued. */
  private async reserve(
    s: KeyAsked & Stored & { entry: CatalogModel; generationId: string; moderation: ModerationColumns | undefined },
  ): Promise<Recorded & { reservation: Reservation }> {
    const stored = storedOf(s);
    const reservation = await this.reservations.reserve(s.key, s.entry, s.input.n ?? 1, stored, !s.background, s.generationId, s.moderation);
    return { row: reservation.row, stored, reservation };
  }

  /** An internal service's generation row, held by this process: recorded, not charged. */
  private async record(s: Asked & Stored & { entry: CatalogModel; generationId: string; owner: ImageOwner }): Promise<Recorded> {
    const stored = storedOf(s);
    return { row: await this.reservations.record(s.owner.id, s.entry, s.input.n ?? 1, stored, s.generationId), stored };
  }

  /** Runs a row this process holds, for a client awaiting it; its disconnect aborts (fails and releases) the run. */
  private async run({ row, stored, signal }: Recorded & Waiting): Promise<{ outcome: GenerationOutcome }> {
    try {
      return { outcome: await this.deps.worker.holdLocal(row, signal, (held, runSignal) => this.deps.runner.execute(held, runSignal, stored)) };
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

/** What the steps before the reservation chose, which the stored request keeps. */
interface Stored {
  request: StoredGenerationRequest;
  fallbacks: Pick<StoredGenerationRequest, 'fallbacks'>;
  inputs: StoredInputs | undefined;
  webhook?: GenerationWebhook | undefined;
}

function storedOf({ request, fallbacks, inputs, webhook }: Stored): StoredGenerationRequest {
  return { ...request, ...fallbacks, ...(inputs ? { inputs } : {}), ...(webhook ? { webhook } : {}) };
}

function refuseServiceWebhook({ input }: Asked): void {
  if (input.webhook !== undefined || input.webhook_events_filter !== undefined) {
    throw new ApiError('invalid_request', 'Completion webhooks belong to client keys; the internal API has none.', { param: 'webhook' });
  }
}

/** What a worker needs to run the generation later, on any replica. */
function storedRequestFor(entry: CatalogModel, input: GenerationInput, background: boolean): StoredGenerationRequest {
  const [width, height] = (input.size ?? entry.default_size).split('x').map(Number) as [number, number];
  // Refused here, before the reservation: a size, quality or output option the upstream would refuse is never charged nor sent.
  checkSize(entry.model, width, height, entry.size_bounds);
  checkPromptLength(entry.model, input.prompt, modelSpecOfEntry(entry));
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
