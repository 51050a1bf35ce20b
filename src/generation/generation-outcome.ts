import type { CatalogModel } from '../config/catalog';
import type { ProviderImage } from '../providers/provider';

/** What a generation produced, before each API shapes it into its own response. */
export interface GenerationOutcome {
  id: string;
  created: number;
  /** The model that delivered: the requested one, or one of its fallbacks. */
  entry: CatalogModel;
  /** The model the request asked for. */
  requestedModel: string;
  images: ProviderImage[];
  /** What it was charged (recorded, for an internal service): the price of `entry`. */
  credits: number;
}
