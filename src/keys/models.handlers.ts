import type { CatalogModel } from '../config/catalog';
import type { GatewayHandlers } from '../http/handler-maps';
import { modelForKey, modelsForKey } from './key-policy';

type ModelHandlers = Pick<GatewayHandlers, 'listModelsOpenAI' | 'getModelOpenAI'>;

/** OpenAI's `GET /v1/models` and `GET /v1/models/{model}`: what the calling key may use. */
export function modelHandlers(catalog: ReadonlyMap<string, CatalogModel>): ModelHandlers {
  return {
    listModelsOpenAI: ({ principal }) => ({ status: 200, body: { object: 'list', data: modelsForKey(principal.key, catalog) } }),
    getModelOpenAI: ({ principal, params }) => ({ status: 200, body: modelForKey(principal.key, catalog, params.model) }),
  };
}
