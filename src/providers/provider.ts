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
 * Speaks one wire format with one account's credentials (built by wire-client.ts). Implementations
 * throw ApiError with a provider_* (or content) code on failure and must stop work when `signal` aborts.
 */
export interface WireClient {
  generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]>;
}
