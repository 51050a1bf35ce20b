import { ImagesApiClient } from './images-api/images-api-client';
import { VisualTransport } from './jimeng/visual-transport';
import { LocalProvider } from './local/local.provider';
import type { WireClient } from './provider';

/** The wire formats the gateway speaks: a channel's `transport`. */
export type WireFormat = 'visual' | 'ark' | 'images-api' | 'local';

/** An account on an upstream: where it is and how it signs in; the built-in `local` renderer has neither. */
export type WireAccount =
  | { format: 'local'; provider: string }
  | { format: 'visual'; provider: string; baseUrl: string; credentials: { access_key_id: string; secret_access_key: string } }
  | { format: 'ark' | 'images-api'; provider: string; baseUrl: string; credentials: { api_key: string } };

export interface WireSettings {
  /** How often an accepted visual task is polled. */
  pollIntervalMs: number;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly: boolean;
  /** `tiny`: the local renderer answers a fixed 1x1 PNG (benchmarks). */
  localMode?: 'render' | 'tiny';
}

/** What Ark needs besides the OpenAI fields for Seedream. */
export const ARK_EXTRA_BODY = { watermark: false, sequential_image_generation: 'disabled' };

/**
 * The one map from a wire format to its client, for the environment's accounts and the API's
 * channels alike. `provider` names the upstream in errors and logs.
 */
export function wireClient(account: WireAccount, settings: WireSettings): WireClient {
  const { publicOnly } = settings;
  switch (account.format) {
    case 'local':
      return new LocalProvider(settings.localMode ?? 'render');
    case 'visual':
      return new VisualTransport({
        endpoint: account.baseUrl,
        credentials: { accessKeyId: account.credentials.access_key_id, secretAccessKey: account.credentials.secret_access_key },
        pollIntervalMs: settings.pollIntervalMs,
        publicOnly,
      });
    case 'ark':
      // Ark makes one image per call.
      return new ImagesApiClient({ provider: account.provider, baseUrl: account.baseUrl, apiKey: account.credentials.api_key, extraBody: ARK_EXTRA_BODY, oneImagePerCall: true, publicOnly });
    case 'images-api':
      return new ImagesApiClient({ provider: account.provider, baseUrl: account.baseUrl, apiKey: account.credentials.api_key, oneImagePerCall: false, publicOnly });
  }
}
