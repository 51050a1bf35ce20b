import type { components } from '../../generated/gateway';
import { gatewayOperations } from '../../generated/gateway.operations';
import { ApiError } from '../errors/api-error';
import { ERROR_CODES, type ErrorCode } from '../errors/error-codes';
import type { GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import { parsePrefer } from '../http/prefer';
import type { ClientKey } from '../keys/key.model';
import type { GenerationFeature } from './create-generation';
import type { ClientGeneration } from './generation-resource';
import { secretResource } from './completion-webhooks';
import { uploadedFiles } from '../images/inputs/multipart-body';
import type { ProviderImageOptions } from '../providers/provider';
import { type GenerationInput, generationSummary } from './generation.service';

type GenerationHandlers = Pick<
  GatewayHandlers,
  'generateImage' | 'createImageOpenAI' | 'editImageOpenAI' | 'listGenerations' | 'getGeneration' | 'cancelGeneration' | 'getWebhookSigningSecret'
>;

/** What the client generation handlers use of the generation feature. */
type GenerationParts = Pick<GenerationFeature, 'service' | 'clients' | 'resources' | 'completionWebhooks'>;

type Prefer = NonNullable<ReturnType<typeof parsePrefer>>;

/** What a generation handler is called with, all but the body. */
interface Asked {
  key: ClientKey;
  signal: AbortSignal;
  /** The `Prefer` header, parsed: absent for a synchronous request. */
  prefer: Prefer | undefined;
  requestId: string;
}

function askedOf(request: { principal: { key: ClientKey }; signal: AbortSignal; requestId: string; header(name: string): string | undefined }): Asked {
  return { key: request.principal.key, signal: request.signal, prefer: parsePrefer(request.header('prefer')), requestId: request.requestId };
}

/** `wait=N` honoured (RFC 7240 §3): the answer came within the wait, or the wait ran out into a 202. */
function waitApplied(prefer: { waitSeconds: number }): string[] {
  return prefer.waitSeconds > 0 ? [`wait=${prefer.waitSeconds}`] : [];
}

/** Preference-Applied of a 200 answered to a `Prefer` request: the wait it was answered within. */
function doneHeaders(prefer: { waitSeconds: number }): { headers?: Record<string, string> } {
  const applied = waitApplied(prefer);
  return applied.length > 0 ? { headers: { 'Preference-Applied': applied.join(', ') } } : {};
}

interface Accepted {
  status: 202;
  body: ClientGeneration;
  headers: Record<string, string>;
}

/**
 * Submits asynchronously; with `wait=N`, waits up to N s for the result. Returns the settled row's
 * resource when it succeeded in time, throws its error when it failed in time with a code of the
 * error table (as the synchronous path would), else the 202 answer.
 */
async function submitAsync(
  { service, clients, resources }: GenerationParts,
  { key, requestId }: Asked,
  prefer: Prefer,
  input: GenerationInput,
): Promise<{ done: ClientGeneration; creditsRemaining: number; creditsPerImage: number } | Accepted> {
  const submitted = await service.submitForKey(key, input, requestId);
  let row = submitted.row;
  if (prefer.waitSeconds > 0) row = (await clients.waitForSettled(row.id, prefer.waitSeconds * 1000)) ?? row;
  const resource = await resources.resource(row);
  // Settled, the row holds what the delivered images cost on the delivering model; the rest of what it
  // reserved went back to the key.
  if (resource.status === 'succeeded') {
    return {
      done: resource,
      creditsRemaining: submitted.creditsRemaining + submitted.row.credits - row.credits,
      creditsPerImage: row.credits / Math.max(1, resource.usage.images),
    };
  }
  if (resource.status === 'failed' && resource.error && resource.error.code in ERROR_CODES) {
    throw new ApiError(resource.error.code as ErrorCode, resource.error.message);
  }
  const applied = [...(prefer.respondAsync ? ['respond-async'] : []), ...waitApplied(prefer)].join(', ');
  return {
    status: 202,
    body: resource,
    headers: { Location: fillPath(gatewayOperations.getGeneration.path, { id: row.id }), 'Preference-Applied': applied },
  };
}

/** A generation answered in the gateway's own shape, synchronously or as `Prefer` asks. */
async function gatewayAnswer(parts: GenerationParts, asked: Asked, input: GenerationInput) {
  const { prefer } = asked;
  if (prefer) {
    const outcome = await submitAsync(parts, asked, prefer, input);
    if (!('done' in outcome)) return outcome;
    const { done } = outcome;
    return {
      status: 200 as const,
      ...doneHeaders(prefer),
      body: {
        id: done.id,
        created: Math.floor(Date.parse(done.created_at) / 1000),
        model: done.model,
        requested_model: done.requested_model,
        provider: done.provider,
        data: done.data ?? [],
        usage: {
          images: done.usage.images,
          credits_charged: done.usage.credits_charged,
          credits_remaining: outcome.creditsRemaining,
          credits_per_image: outcome.creditsPerImage,
        },
      },
    };
  }
  const outcome = await parts.service.generateForKey(asked.key, input, asked.signal, asked.requestId);
  return {
    status: 200 as const,
    body: {
      ...generationSummary(outcome),
      usage: {
        images: outcome.images.length,
        credits_charged: outcome.credits,
        credits_remaining: outcome.creditsRemaining,
        credits_per_image: outcome.creditsPerImage,
      },
    },
  };
}

/** A generation's images as OpenAI answers them (generations and edits alike). */
function openAIImages(images: ReadonlyArray<{ url?: string; b64_json?: string }>, prompt: string) {
  return images.map((image) => ({
    ...(image.url !== undefined ? { url: image.url } : {}),
    ...(image.b64_json !== undefined ? { b64_json: image.b64_json } : {}),
    revised_prompt: prompt,
  }));
}

/** A generation answered in OpenAI's image shape (generations and edits alike), synchronously or as `Prefer` asks. */
async function openAIAnswer(parts: GenerationParts, asked: Asked, input: GenerationInput) {
  const { prefer } = asked;
  if (prefer) {
    const outcome = await submitAsync(parts, asked, prefer, input);
    if (!('done' in outcome)) return outcome;
    return {
      status: 200 as const,
      ...doneHeaders(prefer),
      body: { created: Math.floor(Date.parse(outcome.done.created_at) / 1000), data: openAIImages(outcome.done.data ?? [], input.prompt) },
    };
  }
  const outcome = await parts.service.generateForKey(asked.key, input, asked.signal, asked.requestId);
  return { status: 200 as const, body: { created: outcome.created, data: openAIImages(generationSummary(outcome).data, input.prompt) } };
}

/** The OpenAI request's output options the client gave (the generation service checks them against the model and sends those it documents). */
function imageOptionsOf(options: ProviderImageOptions): { image_options?: ProviderImageOptions } {
  const given = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
  return Object.keys(given).length > 0 ? { image_options: given } : {};
}

type OpenAIGenerationBody = components['schemas']['OpenAIImageRequest'];
type OpenAIEditBody = components['schemas']['OpenAIImageEditRequest'];

/** OpenAI's image generation request, mapped onto the gateway's own generation. */
function generationInputOf(body: OpenAIGenerationBody): GenerationInput {
  const {
    prompt,
    model,
    n,
    size,
    response_format,
    quality,
    webhook,
    webhook_events_filter,
    background,
    output_format,
    output_compression,
    moderation,
    style,
    fallback,
  } = body;
  return {
    prompt,
    model,
    n,
    response_format,
    ...(quality !== undefined ? { quality } : {}),
    ...(fallback !== undefined ? { fallback } : {}),
    ...imageOptionsOf({ background, output_format, output_compression, moderation, style }),
    ...(size && size !== 'auto' ? { size } : {}),
    ...(webhook !== undefined ? { webhook } : {}),
    ...(webhook_events_filter !== undefined ? { webhook_events_filter } : {}),
  };
}

/** OpenAI's image edit request: the uploaded files become the generation's input images. */
function editInputOf(body: OpenAIEditBody): GenerationInput {
  const { prompt, model, n, size, response_format, quality, background, output_format, output_compression, input_fidelity, fallback } = body;
  const files = uploadedFiles(body);
  if (!files || files.images.length === 0) throw new ApiError('invalid_request', 'image: send at least one image file.', { param: 'image' });
  return {
    prompt,
    model,
    n: n === undefined ? 1 : Number(n),
    ...(response_format !== undefined ? { response_format } : {}),
    ...(quality !== undefined ? { quality } : {}),
    ...(fallback !== undefined ? { fallback: fallback === 'true' } : {}),
    // Multipart fields are text: the compression is its digits.
    ...imageOptionsOf({
      background,
      output_format,
      output_compression: output_compression === undefined ? undefined : Number(output_compression),
      input_fidelity,
    }),
    ...(size && size !== 'auto' ? { size } : {}),
    images: files.images,
    ...(files.mask ? { mask: files.mask } : {}),
  };
}

/** The client generation operations: the gateway's own shape and OpenAI's, and generations as resources. */
export function generationHandlers(parts: GenerationParts): GenerationHandlers {
  const { clients, completionWebhooks } = parts;
  return {
    generateImage: async (request) => gatewayAnswer(parts, askedOf(request), request.body),
    createImageOpenAI: async (request) => openAIAnswer(parts, askedOf(request), generationInputOf(request.body)),
    editImageOpenAI: async (request) => openAIAnswer(parts, askedOf(request), editInputOf(request.body)),
    listGenerations: async ({ principal, query }) => ({ status: 200, body: await clients.list(principal.key.id, query) }),
    getGeneration: async ({ principal, params }) => ({ status: 200, body: await clients.get(principal.key.id, params.id) }),
    cancelGeneration: async ({ principal, params }) => ({ status: 200, body: await clients.cancel(principal.key.id, params.id) }),
    getWebhookSigningSecret: async ({ principal }) => {
      if (!completionWebhooks) throw new Error('completion webhooks are not configured');
      return { status: 200, body: secretResource(await completionWebhooks.secretFor(principal.key.id)) };
    },
  };
}
