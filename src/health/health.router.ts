import { sql } from 'kysely';
import { Router } from 'express';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';

/** GET /healthz (the process answers) and GET /readyz (the database answers), on both listeners. */
export function healthRouter(db: Kysely<Database>): Router {
  return Router()
    .get('/healthz', (_req, res) => {
      res.json({ status: 'ok' });
    })
    .get('/readyz', async (_req, res) => {
      try {
        await sql`SELECT 1`.execute(db);
      } catch {
        throw new ApiError('not_ready', 'The database does not answer.');
      }
      res.json({ status: 'ok' });
    });
}
