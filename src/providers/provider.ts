import type { InputImageFormat } from './model-spec';

/** An input image (reference or edit source), already read, sniffed and checked against the model's limits. */
export interface ProviderInputImage {
  bytes: Buffer;
  format: InputImageFormat;
  mimeType: string;
  width: number;
  height: number;
  /** The gateway's signed URL serving these bytes, valid for the task's life: for upstreams that fetch their inputs. */
  url?: string;
}

/** What the gateway asks a provider for, already resolved against the catalog. */
export interface ProviderRequest {
  prompt: string;
  negativePrompt?: string;
  /** The upstream's own model id (catalog `upstream_model`). */
  upstreamModel: string;
  /** The model family its format's table knows it by (catalog `upstream_family`), when the id alone does not say. */
  upstreamFamily?: string;
  /** How the provider reaches this model (catalog `transport`), for providers with several. */
  transport?: string;
  /** Catalog `upstream_options`: extra upstream fields, sent as they are. */
  upstreamOptions?: Record<string, unknown>;
  n: number;
  width: number;
  height: number;
  seed?: number;
  /** The quality asked for (OpenAI's `quality`), for upstreams that take one; it also prices the images. */
  quality?: string;
  responseFormat: 'url' | 'b64_json';
  /** Input images in the client's order (none for text-only requests). */
  inputImages?: readonly ProviderInputImage[];
  /** An edit's mask (same size as the first input; transparent where the image is to change). */
  mask?: ProviderInputImage;
  /**
   * The client's own output options besides `quality` (the OpenAI request's `background`, ...), sent
   * only to upstreams that document them, over the catalog's `upstream_options` of the same name.
   */
  imageOptions?: ProviderImageOptions;
  /** An upstream task accepted earlier (by a process that died): poll it, never submit again. */
  resumeTaskId?: string;
  /** Called with the upstream's task id once it accepted the work, before it is polled (durable generations). */
  onTaskAccepted?: (taskId: string) => Promise<void>;
  /**
   * Called before each poll of an accepted task (formats whose descriptor gives `resume.lifeMs`):
   * throws once the task outlived the upstream's keeping of it, which ends the poll with that error.
   */
  beforePoll?: () => void;
  /** Called with the images the upstream says it billed for a call (Ark's `usage.generated_images`) and the images it delivered. */
  onBilled?: (billedImages: number, deliveredImages: number) => void;
  /** Called when a billable call (a submit or a generation, not a poll) was written to the upstream: from then on it may have been accepted. */
  onRequestSent?: () => void;
}

/** Output options named as OpenAI's Images API names them (node_modules/openai/resources/images.d.ts). */
export interface ProviderImageOptions {
  background?: string;
  output_format?: string;
  output_compression?: number;
  moderation?: string;
  style?: string;
  input_fidelity?: string;
}

/** Tokens an upstream reports for one call (OpenAI's GPT image models: `usage`). */
export interface ProviderTokenUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  inputImageTokens?: number;
  inputTextTokens?: number;
  outputImageTokens?: number;
  outputTextTokens?: number;
}

export interface ProviderImage {
  url?: string;
  /** The host (host[:port]) of the account that produced it: its `url` may point there (channels). */
  sourceHost?: string;
  b64Json?: string;
  width: number;
  height: number;
  /**
   * The tokens of the upstream call that made this image, on the first image of each call only (one
   * call may make several images), so that the sum over a request's images is what the upstream bills.
   */
  usage?: ProviderTokenUsage;
}

/**
 * Speaks one wire format with one account's credentials (built by wire-client.ts). Implementations
 * throw ApiError with a provider_* (or content) code on failure and must stop work when `signal` aborts.
 * An abort listener added to `signal` is removed once the call is done: `signal` outlives the call
 * (it is the request's, shared by its other calls and by a failover's next attempt).
 */
export interface WireClient {
  generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]>;
}
