import { Router } from 'express';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { systemClock } from '../shared/clock';
import { readinessOf } from './readiness';

/** GET /healthz (the process answers) and GET /readyz (every dependency serves), on both listeners. */
export function healthRouter(db: Kysely<Database>): Router {
  return Router()
    .get('/healthz', (_req, res) => {
      res.json({ status: 'ok' });
    })
    .get('/readyz', async (_req, res) => {
      const readiness = await readinessOf(db, systemClock).check();
      if (!readiness.ready) throw new ApiError('not_ready', readiness.reason, { details: { dependency: readiness.dependency } });
      res.json({ status: 'ok' });
    });
}
