import type { ResilientProvider } from './resilience/resilient-provider';

/** Providers by name. The names are what keys list in `allowed_providers`. */
export class ProviderRegistry {
  private readonly providers = new Map<string, ResilientProvider>();

  constructor(providers: ResilientProvider[]) {
    for (const provider of providers) this.providers.set(provider.name, provider);
  }

  get(name: string): ResilientProvider | undefined {
    return this.providers.get(name);
  }

  all(): ResilientProvider[] {
    return [...this.providers.values()];
  }

  names(): ReadonlySet<string> {
    return new Set(this.providers.keys());
  }
}
