import { type Request, type Response, Router } from 'express';
import type { operations } from '../../../generated/gateway';
import type { KeysService } from '../keys.service';

type Query = NonNullable<operations['listKeys']['parameters']['query']>;
type Page = operations['listKeys']['responses']['200']['content']['application/json'];

export function listKeysRouter(keys: KeysService): Router {
  return Router().get('/admin/keys', async (req: Request, res: Response<Page>) => {
    // The validator has checked the query against the spec; only numbers need converting.
    const query = req.query as Record<keyof Query, string | undefined>;
    res.json(
      await keys.listKeys({
        status: query.status as Query['status'],
        owner: query.owner,
        limit: query.limit === undefined ? undefined : Number(query.limit),
        cursor: query.cursor,
      }),
    );
  });
}
