import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Params = operations['updateKey']['parameters']['path'];
type Body = operations['updateKey']['requestBody']['content']['application/json'];
type Key = operations['updateKey']['responses']['200']['content']['application/json'];

export function updateKeyRouter(keys: KeysService): Router {
  return Router().patch('/admin/keys/:id', async (req: Request<Params, Key, Body>, res: Response<Key>) => {
    res.json(await keys.updateKey(req.params.id, req.body));
  });
}
