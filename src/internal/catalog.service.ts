import type { components } from '../../generated/creative';
import type { ChannelRouter } from '../channels/channel-router';
import { type CatalogModel, fallbackChain } from '../config/catalog';
import { effectiveInputLimits } from '../images/inputs/input-limits';
import { creditPriceOf } from '../pricing/catalog-prices';
import type { ProviderRegistry } from '../providers/registry';

type Schemas = components['schemas'];

/** The model catalog and provider health (over the providers' channels), as the internal API shows them. */
export class CatalogService {
  constructor(
    private readonly catalog: ReadonlyMap<string, CatalogModel>,
    private readonly providers: ProviderRegistry,
    private readonly channels: ChannelRouter,
  ) {}

  async models(): Promise<Schemas['Model'][]> {
    return Promise.all(
      [...this.catalog.values()].map(async (entry) => {
        const fallbacks = fallbackChain(entry, this.catalog).map((next) => next.model);
        const status = await this.channels.modelStatus(entry);
        return {
          model: entry.model,
          provider: entry.provider,
          transport: entry.transport ?? null,
          upstream_model: entry.upstream_model,
          credits_per_image: entry.credits_per_image,
          ...(entry.price ? { price: entry.price } : {}),
          credit_price: creditPriceOf(entry),
          default_size: entry.default_size,
          ...(entry.size_bounds ? { size_bounds: entry.size_bounds } : {}),
          // As the intake takes them (and GET /v1/models shows them): the model's own within the gateway's.
          ...(entry.input_limits ? { input_limits: { ...effectiveInputLimits(entry.input_limits), formats: [...entry.input_limits.formats] } } : {}),
          ...(fallbacks.length > 0 ? { fallbacks } : {}),
          status,
        };
      }),
    );
  }

  async providerHealth(): Promise<Schemas['ProviderHealth'][]> {
    return Promise.all(
      [...this.providers.names()].map(async (name) => {
        const transports = [...new Set([...this.catalog.values()].filter((m) => m.provider === name).map((m) => m.transport))];
        const configured = transports.length === 0 ? this.channels.isConfigured(name) : Promise.all(transports.map((t) => this.channels.isConfigured(name, t)));
        const result = await configured;
        return {
          name,
          configured: Array.isArray(result) ? result.some(Boolean) : result,
          ...(await this.channels.providerHealth(name)),
        };
      }),
    );
  }
}
