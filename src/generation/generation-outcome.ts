import type { CatalogModel } from '../config/catalog';
import type { ProviderImage } from '../providers/provider';

/** What a generation produced, before each API shapes it into its own response. */
export interface GenerationOutcome {
  id: string;
  created: number;
  entry: CatalogModel;
  images: ProviderImage[];
  credits: number;
}
