import type { ImageProvider } from './provider';

/** Providers by name, as configured by environment variables. The names are what keys list in `allowed_providers`. */
export class ProviderRegistry {
  private readonly providers = new Map<string, ImageProvider>();

  constructor(providers: ImageProvider[]) {
    for (const provider of providers) this.providers.set(provider.name, provider);
  }

  get(name: string): ImageProvider | undefined {
    return this.providers.get(name);
  }

  all(): ImageProvider[] {
    return [...this.providers.values()];
  }

  names(): ReadonlySet<string> {
    return new Set(this.providers.keys());
  }
}
