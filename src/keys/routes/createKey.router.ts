import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Body = operations['createKey']['requestBody']['content']['application/json'];
type Created = operations['createKey']['responses']['201']['content']['application/json'];

export function createKeyRouter(keys: KeysService): Router {
  return Router().post('/admin/keys', async (req: Request<object, Created, Body>, res: Response<Created>) => {
    const created = await keys.createKey(req.body);
    res.status(201).location(`/admin/keys/${created.id}`).json(created);
  });
}
