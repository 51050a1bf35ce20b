import { type Request, type Response, Router } from 'express';
import type { operations } from '../../generated/creative';
import type { UsageService } from './usage.service';

type Query = operations['getUsage']['parameters']['query'];
type Usage = operations['getUsage']['responses']['200']['content']['application/json'];

export function getUsageRouter(usage: UsageService): Router {
  return Router().get('/api/v1/creative/usage', async (req: Request, res: Response<Usage>) => {
    const query = req.query as Query;
    res.json({ from: new Date(query.from).toISOString(), to: new Date(query.to).toISOString(), data: await usage.usage(query) });
  });
}
