import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Params = operations['getKey']['parameters']['path'];
type Key = operations['getKey']['responses']['200']['content']['application/json'];

export function getKeyRouter(keys: KeysService): Router {
  return Router().get('/admin/keys/:id', async (req: Request<Params>, res: Response<Key>) => {
    res.json(await keys.getKey(req.params.id));
  });
}
