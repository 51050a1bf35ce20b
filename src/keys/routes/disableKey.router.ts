import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Params = operations['disableKey']['parameters']['path'];
type Key = operations['disableKey']['responses']['200']['content']['application/json'];

export function disableKeyRouter(keys: KeysService): Router {
  return Router().delete('/admin/keys/:id', async (req: Request<Params>, res: Response<Key>) => {
    res.json(await keys.disableKey(req.params.id));
  });
}
