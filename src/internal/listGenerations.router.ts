import { type Request, type Response, Router } from 'express';
import type { operations } from '../../generated/creative';
import type { UsageService } from './usage.service';

type Query = NonNullable<operations['listGenerations']['parameters']['query']>;
type Page = operations['listGenerations']['responses']['200']['content']['application/json'];

export function listGenerationsRouter(usage: UsageService): Router {
  return Router().get('/api/v1/creative/generations', async (req: Request, res: Response<Page>) => {
    // The validator has checked the query against the spec; only numbers need converting.
    const query = req.query as Record<keyof Query, string | undefined>;
    res.json(await usage.listGenerations({ ...query, limit: query.limit === undefined ? undefined : Number(query.limit) }));
  });
}
