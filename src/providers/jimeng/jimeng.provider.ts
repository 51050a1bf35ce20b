import { ApiError } from '../../errors/api-error';
import { ImagesApiClient } from '../images-api/images-api-client';
import type { ImageProvider, ProviderImage, ProviderRequest } from '../provider';
import { VisualTransport } from './visual-transport';
import type { VolcCredentials } from './volc-signer';

export interface JimengSettings {
  /** Volcengine visual API (jimeng_t2i_* req_keys); undefined without VOLC_* credentials. */
  visual?: { endpoint: string; credentials: VolcCredentials; pollIntervalMs: number };
  /** Volcengine Ark images API (Seedream models); undefined without ARK_API_KEY. */
  ark?: { baseUrl: string; apiKey: string };
}

/**
 * What Ark needs besides the OpenAI fields for Seedream. `sequential_image_generation` defaults to
 * `disabled` (one image per call) but is sent anyway: under `auto` a call with reference images may
 * return, and bill, a group of images, which the gateway does not offer.
 */
export const JIMENG_ARK_EXTRA_BODY = { watermark: false, sequential_image_generation: 'disabled' };

/**
 * Jimeng / Seedream. Each catalog model says which transport serves it; the name a key must
 * allow is `jimeng` whichever it is.
 */
export class JimengProvider implements ImageProvider {
  readonly name = 'jimeng';
  private readonly visual?: VisualTransport;
  private readonly ark?: ImagesApiClient;

  constructor(settings: JimengSettings) {
    if (settings.visual) this.visual = new VisualTransport(settings.visual);
    if (settings.ark) {
      this.ark = new ImagesApiClient({
        provider: this.name,
        baseUrl: settings.ark.baseUrl,
        apiKey: settings.ark.apiKey,
        extraBody: JIMENG_ARK_EXTRA_BODY,
        oneImagePerCall: true,
      });
    }
  }

  isConfigured(transport?: string): boolean {
    return transport === 'ark' ? this.ark !== undefined : this.visual !== undefined;
  }

  generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    if (request.transport === 'ark') {
      if (!this.ark) throw this.unconfigured('ARK_API_KEY');
      return this.ark.generate(request, signal);
    }
    if (!this.visual) throw this.unconfigured('VOLC_ACCESS_KEY_ID and VOLC_SECRET_ACCESS_KEY');
    return this.visual.generate(request, signal);
  }

  private unconfigured(variables: string): ApiError {
    return new ApiError('provider_unavailable', `Provider jimeng is not configured on this gateway: set ${variables}.`, { param: 'model' });
  }
}
