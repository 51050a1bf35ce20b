import { type CatalogModel, fallbackChain } from '../config/catalog';
import { qualityRefusal } from '../config/price-table';
import type { CheckedInputs } from '../images/inputs/input-images';
import { inputsFit } from '../images/inputs/input-limits';
import { mayUse } from '../keys/key-policy';
import type { ClientKey } from '../keys/key.model';
import { sizeOutOfBounds } from '../providers/model-spec';

/** What decides which fallbacks a request may take, besides the catalog. */
export interface FallbackRequest {
  /** The request's `fallback` (default true): false keeps it on the requested model. */
  wanted: boolean | undefined;
  /** The key that pays; an internal service (none) may use every model. */
  key?: Pick<ClientKey, 'policy' | 'allowedProviders'>;
  width: number;
  height: number;
  quality?: string | undefined;
  /** The request's input images, as read and checked for the requested model. */
  inputs?: CheckedInputs | undefined;
}

/**
 * The models a request may continue on, in order (the catalog's chain, fallbackChain): each one the
 * key may use and that takes the request as it was admitted (its size, quality and input images),
 * since a fallback must never refuse what the requested model accepted, nor charge at a price the
 * request did not ask for. Empty when the request turns fallbacks off.
 */
export function requestFallbacks(entry: CatalogModel, catalog: ReadonlyMap<string, CatalogModel>, request: FallbackRequest): CatalogModel[] {
  if (request.wanted === false) return [];
  return fallbackChain(entry, catalog).filter(
    (next) =>
      (request.key === undefined || mayUse(request.key, next)) &&
      (next.size_bounds === undefined || sizeOutOfBounds(request.width, request.height, next.size_bounds) === undefined) &&
      qualityRefusal(next, request.quality) === undefined &&
      inputsFit(next.model, next.input_limits, request.inputs),
  );
}
