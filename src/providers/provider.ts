/** What the gateway asks a provider for, already resolved against the catalog. */
export interface ProviderRequest {
  prompt: string;
  negativePrompt?: string;
  /** The upstream's own model id (catalog `upstream_model`). */
  upstreamModel: string;
  /** How the provider reaches this model (catalog `transport`), for providers with several. */
  transport?: string;
  /** Catalog `upstream_options`: extra upstream fields, sent as they are. */
  upstreamOptions?: Record<string, unknown>;
  n: number;
  width: number;
  height: number;
  seed?: number;
  responseFormat: 'url' | 'b64_json';
  /** An upstream task accepted earlier (by a process that died): poll it, never submit again. */
  resumeTaskId?: string;
  /** Called with the upstream's task id once it accepted the work, before it is polled (durable generations). */
  onTaskAccepted?: (taskId: string) => Promise<void>;
  /** Called when a billable call (a submit or a generation, not a poll) was written to the upstream: from then on it may have been accepted. */
  onRequestSent?: () => void;
}

export interface ProviderImage {
  url?: string;
  /** The host (host[:port]) of the account that produced it: its `url` may point there (channels). */
  sourceHost?: string;
  b64Json?: string;
  width: number;
  height: number;
}

/**
 * An image-generation backend. Implementations throw ApiError with a provider_* (or
 * content) code on failure and must stop work when `signal` aborts. An abort listener added to
 * `signal` is removed once the call is done: `signal` is derived (AbortSignal.any), and Node keeps a
 * derived signal with a listener on it alive until one of its sources aborts.
 */
export interface ImageProvider {
  readonly name: string;
  /** Whether it has what it needs (credentials) to serve models over `transport`. */
  isConfigured(transport?: string): boolean;
  generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]>;
}
