import { type Response, Router } from 'express';
import type { operations } from '../../generated/creative';
import type { CatalogService } from './catalog.service';

type Providers = operations['listProviders']['responses']['200']['content']['application/json'];

export function listProvidersRouter(catalog: CatalogService): Router {
  return Router().get('/api/v1/creative/providers', (_req, res: Response<Providers>) => {
    res.json({ data: catalog.providerHealth() });
  });
}
