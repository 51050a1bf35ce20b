import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { insertAttempts } from '../../src/channels/channels.repository';
import { openDatabase, type GatewayDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { completeGeneration, insertGeneration } from '../../src/generation/generations.repository';
import { generationRow } from '../helpers/generation-rows';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';

// Prepared hot-path queries run on the SQLite connection without kysely's executor (src/db/sqlite-direct.ts).
// What must not change: which transaction a statement belongs to, and what its result and errors are.
describe('prepared queries on SQLite, run directly on the connection', () => {
  let throwaway: ThrowawayDatabase;
  let database: GatewayDatabase;
  let other: SQLite.Database;
  const committedIds = () => (other.prepare('SELECT id FROM generations ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id);
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  beforeEach(async () => {
    throwaway = await createThrowawayDatabase('sqlite');
    database = openDatabase(throwaway.url);
    await migrateToLatest(database.db as never, 'sqlite');
    other = new SQLite(throwaway.url, { readonly: true });
  });
  afterEach(async () => {
    other.close();
    await database.close();
    await throwaway.drop();
  });

  it('on a transaction: part of it, rolled back with it', async () => {
    await expect(
      database.db.transaction().execute(async (trx) => {
        await insertGeneration(trx, generationRow('gen_inside'));
        // The transaction sees its own uncommitted row through kysely as well.
        expect((await trx.selectFrom('generations').select('id').execute()).map((r) => r.id)).toEqual(['gen_inside']);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(committedIds()).toEqual([]);
  });

  it('on the database while a transaction is open on the connection: waits for it instead of joining it', async () => {
    let outside: Promise<void> | undefined;
    await expect(
      database.db.transaction().execute(async (trx) => {
        await insertGeneration(trx, generationRow('gen_rolled_back'));
        // Another request's statement, on the database, arrives while the transaction waits on something.
        outside = insertGeneration(database.db, generationRow('gen_outside'));
        await pause(30);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    await outside;
    // Had it joined the open transaction, the rollback would have taken it too.
    expect(committedIds()).toEqual(['gen_outside']);
  });

  it('results as kysely gives them: affected rows of a write, rows of a read', async () => {
    await insertGeneration(database.db, generationRow('gen_a', { status: 'running' }));
    expect(await completeGeneration(database.db, 'gen_a', { status: 'succeeded', errorCode: null, latencyMs: 5, completedAt: 1 })).toBe(true);
    // Settled already: the conditional UPDATE changes no row.
    expect(await completeGeneration(database.db, 'gen_a', { status: 'failed', errorCode: 'x', latencyMs: 5, completedAt: 2 })).toBe(false);
    const attempt = { generation_id: 'gen_a', seq: 0, image_index: 0, channel_id: 'env-local', outcome: 'succeeded', error_code: null, latency_ms: 5, started_at: 1 };
    await insertAttempts(database.db, [attempt]);
    // A row already there is kept (ON CONFLICT DO NOTHING), not an error.
    await insertAttempts(database.db, [{ ...attempt, outcome: 'failed' }]);
    expect(await database.db.selectFrom('generation_attempts').selectAll().execute()).toEqual([attempt]);
  });

  it("errors as kysely's path gives them: a statement's own error as SQLite raised it, an unusable file as dependency_unavailable", async () => {
    await insertGeneration(database.db, generationRow('gen_taken'));
    await expect(insertGeneration(database.db, generationRow('gen_taken'))).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    await sql`PRAGMA query_only = 1`.execute(database.db);
    await expect(insertGeneration(database.db, generationRow('gen_b'))).rejects.toMatchObject({ name: 'DependencyUnavailableError' });
  });
});
