import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { failGeneration } from '../../src/generation/settlement.repository';
import { createThrowawayDatabase } from '../helpers/test-database';

describe('migration 0006 (usage epochs) on a database in use', () => {
  it('keeps in-flight generations releasing where they did: to the stored period, not a later one', async () => {
    const throwaway = await createThrowawayDatabase();
    const database = openDatabase(throwaway.url);
    try {
      await migrateToLatest(database.db as never, database.engine, '0005_pending_generations_index');
      const period = 1_800_000_000_000;
      const later = period + 86_400_000;
      await sql`INSERT INTO api_keys (id, key_hash, hint, name, owner, status, credits_quota, credits_used, quota_period_days,
        period_started_at, rate_limit_rpm, allowed_providers, expires_at, created_at, updated_at, disabled_at, last_used_at)
        VALUES ('key_a', 'h', 'h', 'n', 'o', 'active', 10, 3, 1, ${later}, 30, '[]', NULL, ${period}, ${period}, NULL, NULL)`.execute(database.db);
      const pending = (id: string, periodStart: number) =>
        sql`INSERT INTO generations (id, key_id, client_id, model, provider, images, credits, status, error_code, latency_ms,
          period_started_at, created_at, completed_at) VALUES (${id}, 'key_a', NULL, 'm', 'local', 1, 1, 'pending', NULL, NULL,
          ${periodStart}, ${periodStart}, NULL)`.execute(database.db);
      await pending('gen_current', later);
      await pending('gen_older', period);

      await migrateToLatest(database.db as never, database.engine);
      const epochs = await database.db.selectFrom('generations').select(['id', 'usage_epoch']).orderBy('id').execute();
      expect(epochs.map((g) => [g.id, Number(g.usage_epoch)])).toEqual([
        ['gen_current', 1],
        ['gen_older', 0],
      ]);
      const used = async () => Number((await database.db.selectFrom('api_keys').select('credits_used').executeTakeFirstOrThrow()).credits_used);
      for (const id of ['gen_older', 'gen_current']) {
        const generation = await database.db.selectFrom('generations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
        await database.db.transaction().execute((trx) => failGeneration(trx, generation, { errorCode: 'abandoned', latencyMs: null, completedAt: later }));
      }
      // The older period's generation gives nothing back to the current one; the current one's credit returns.
      expect(await used()).toBe(2);
    } finally {
      await database.close();
      await throwaway.drop();
    }
  });
});
