import type { ModelStatus } from '../channels/channel-health';
import type { CatalogModel } from '../config/catalog';
import type { GatewayHandlers } from '../http/handler-maps';
import { type OpenAIModel, modelForKey, modelsForKey } from './key-policy';

type ModelHandlers = Pick<GatewayHandlers, 'listModelsOpenAI' | 'getModelOpenAI'>;

/** Whether a catalog model can serve now (ChannelRouter.modelStatus). */
export type ModelStatusOf = (entry: CatalogModel) => Promise<ModelStatus>;

/** OpenAI's `GET /v1/models` and `GET /v1/models/{model}`: what the calling key may use, each with whether a channel serves it. */
export function modelHandlers(catalog: ReadonlyMap<string, CatalogModel>, statusOf: ModelStatusOf): ModelHandlers {
  // Every model a key sees comes from the catalog.
  const withStatus = async (model: OpenAIModel) => ({ ...model, status: await statusOf(catalog.get(model.id) as CatalogModel) });
  return {
    listModelsOpenAI: async ({ principal }) => ({
      status: 200,
      body: { object: 'list', data: await Promise.all(modelsForKey(principal.key, catalog).map(withStatus)) },
    }),
    getModelOpenAI: async ({ principal, params }) => ({ status: 200, body: await withStatus(modelForKey(principal.key, catalog, params.model)) }),
  };
}
