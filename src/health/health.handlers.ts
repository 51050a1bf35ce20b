import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';

type Healthy = { status: 200; body: { status: 'ok' } };

/** Liveness (the process answers) and readiness (its dependencies answer), on both listeners. */
export function healthHandlers(db: Kysely<Database>): { liveness: () => Healthy; readiness: () => Promise<Healthy> } {
  return {
    liveness: () => ({ status: 200, body: { status: 'ok' } }),
    readiness: async () => {
      try {
        await sql`SELECT 1`.execute(db);
      } catch {
        throw new ApiError('not_ready', 'The database does not answer.');
      }
      return { status: 200, body: { status: 'ok' } };
    },
  };
}
