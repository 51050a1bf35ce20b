import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Params = operations['rotateKey']['parameters']['path'];
type Rotated = operations['rotateKey']['responses']['200']['content']['application/json'];

export function rotateKeyRouter(keys: KeysService): Router {
  return Router().post('/admin/keys/:id/rotate', async (req: Request<Params>, res: Response<Rotated>) => {
    res.json(await keys.rotateKey(req.params.id));
  });
}
