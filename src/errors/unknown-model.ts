import type { CatalogModel } from '../config/catalog';
import { ApiError } from './api-error';

/** A model the catalog lacks, wherever one is named (a request, a key's policy, a channel): the catalog's models listed. */
export function unknownModelMessage(models: readonly string[], catalog: ReadonlyMap<string, CatalogModel>): string {
  return `Unknown model ${models.join(', ')}. Known models: ${[...catalog.keys()].join(', ')}.`;
}

/** The 404 of a request (or a model lookup) naming a model the catalog lacks. */
export function modelNotFound(model: string, catalog: ReadonlyMap<string, CatalogModel>): ApiError {
  return new ApiError('model_not_found', unknownModelMessage([model], catalog), { param: 'model' });
}
