import type { components } from '../../generated/creative';
import type { CatalogModel } from '../config/catalog';
import type { ProviderRegistry } from '../providers/registry';

type Schemas = components['schemas'];

/** The model catalog and provider health, as the internal API shows them. */
export class CatalogService {
  constructor(
    private readonly catalog: ReadonlyMap<string, CatalogModel>,
    private readonly providers: ProviderRegistry,
  ) {}

  models(): Schemas['Model'][] {
    return [...this.catalog.values()].map((entry) => {
      const provider = this.providers.get(entry.provider);
      const status: Schemas['Model']['status'] = !provider?.isConfigured(entry.transport)
        ? 'unconfigured'
        : provider.health().circuit === 'open'
          ? 'degraded'
          : 'available';
      return {
        model: entry.model,
        provider: entry.provider,
        transport: entry.transport ?? null,
        upstream_model: entry.upstream_model,
        credits_per_image: entry.credits_per_image,
        default_size: entry.default_size,
        status,
      };
    });
  }

  providerHealth(): Schemas['ProviderHealth'][] {
    return this.providers.all().map((provider) => {
      const transports = [...new Set([...this.catalog.values()].filter((m) => m.provider === provider.name).map((m) => m.transport))];
      return {
        name: provider.name,
        configured: transports.length === 0 ? provider.isConfigured() : transports.some((t) => provider.isConfigured(t)),
        ...provider.health(),
      };
    });
  }
}
