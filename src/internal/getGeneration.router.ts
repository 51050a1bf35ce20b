import { type Request, type Response, Router } from 'express';
import type { operations } from '../../generated/creative';
import type { UsageService } from './usage.service';

type Params = operations['getGeneration']['parameters']['path'];
type Generation = operations['getGeneration']['responses']['200']['content']['application/json'];

export function getGenerationRouter(usage: UsageService): Router {
  return Router().get('/api/v1/creative/generations/:id', async (req: Request<Params>, res: Response<Generation>) => {
    res.json(await usage.getGeneration(req.params.id));
  });
}
