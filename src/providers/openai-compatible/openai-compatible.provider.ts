import { ImagesApiClient } from '../images-api/images-api-client';
import type { ImageProvider, ProviderImage, ProviderRequest } from '../provider';

/** Any OpenAI-compatible images API (OpenAI itself, self-hosted servers), under a configurable name. */
export class OpenAiCompatibleProvider implements ImageProvider {
  private readonly client: ImagesApiClient;

  constructor(
    readonly name: string,
    settings: { baseUrl: string; apiKey: string },
  ) {
    this.client = new ImagesApiClient({ provider: name, baseUrl: settings.baseUrl, apiKey: settings.apiKey, oneImagePerCall: false });
  }

  isConfigured(): boolean {
    return true;
  }

  generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    return this.client.generate(request, signal);
  }
}
