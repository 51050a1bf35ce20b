import { generationSummary, type GenerationService } from '../generation/generation.service';
import type { CreativeHandlers } from '../http/handler-maps';
import type { CatalogService } from './catalog.service';
import { toIso } from '../shared/clock';
import { parseTimestamp } from '../shared/rfc3339';
import type { UsageService } from './usage.service';

type InternalHandlers = Pick<CreativeHandlers, 'listModels' | 'listProviders' | 'createGeneration' | 'listGenerations' | 'getGeneration' | 'getUsage'>;

/** The internal creative API's operations (service-token principals). */
export function internalHandlers(deps: { generation: GenerationService; catalog: CatalogService; usage: UsageService }): InternalHandlers {
  const { generation, catalog, usage } = deps;
  return {
    listModels: async () => ({ status: 200, body: { data: await catalog.models() } }),
    listProviders: async () => ({ status: 200, body: { data: await catalog.providerHealth() } }),
    createGeneration: async ({ principal, body, signal }) => {
      const outcome = await generation.generateForService(principal.clientId, body, signal);
      return { status: 200, body: { ...generationSummary(outcome), usage: { images: outcome.images.length, credits: outcome.credits } } };
    },
    listGenerations: async ({ query }) => ({ status: 200, body: await usage.listGenerations(query) }),
    getGeneration: async ({ params }) => ({ status: 200, body: await usage.getGeneration(params.id) }),
    getUsage: async ({ query }) => ({
      status: 200,
      body: { from: toIso(parseTimestamp(query.from, 'from')), to: toIso(parseTimestamp(query.to, 'to')), data: await usage.usage(query) },
    }),
  };
}
