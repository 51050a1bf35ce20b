import { ApiError } from '../errors/api-error';
import type { ImageProvider, ProviderImage } from './provider';

/** Stands in for a provider that is in the catalog but cannot be used (no adapter or no credentials). */
export class UnavailableProvider implements ImageProvider {
  constructor(
    readonly name: string,
    private readonly reason: string,
  ) {}

  async generate(): Promise<ProviderImage[]> {
    throw new ApiError('provider_unavailable', `Provider ${this.name} is not available on this gateway: ${this.reason}`, {
      param: 'model',
    });
  }
}
