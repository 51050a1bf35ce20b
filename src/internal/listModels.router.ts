import { type Response, Router } from 'express';
import type { operations } from '../../generated/creative';
import type { CatalogService } from './catalog.service';

type Models = operations['listModels']['responses']['200']['content']['application/json'];

export function listModelsRouter(catalog: CatalogService): Router {
  return Router().get('/api/v1/creative/models', (_req, res: Response<Models>) => {
    res.json({ data: catalog.models() });
  });
}
