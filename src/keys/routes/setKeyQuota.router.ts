import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Params = operations['setKeyQuota']['parameters']['path'];
type Body = operations['setKeyQuota']['requestBody']['content']['application/json'];
type Key = operations['setKeyQuota']['responses']['200']['content']['application/json'];

export function setKeyQuotaRouter(keys: KeysService): Router {
  return Router().post('/admin/keys/:id/quota', async (req: Request<Params, Key, Body>, res: Response<Key>) => {
    res.json(await keys.setQuota(req.params.id, req.body));
  });
}
