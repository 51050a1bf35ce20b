import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, sql } from 'kysely';
import pino from 'pino';
import { insertAttempts } from '../../src/generation/attempts.repository';
import { openDatabase, type GatewayDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { preparedQuery } from '../../src/db/prepared-query';
import { DependencyHealth } from '../../src/health/dependency-health';
import { insertGeneration } from '../../src/generation/generations.repository';
import { completeGeneration } from '../../src/generation/settlement.repository';
import { generationRow } from '../helpers/generation-rows';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';

// Prepared hot-path queries run on the SQLite connection without kysely's executor (src/db/sqlite-direct.ts).
// What must not change: which transaction a statement belongs to, and what its result and errors are.
describe('prepared queries on SQLite, run directly on the connection', () => {
  let throwaway: ThrowawayDatabase;
  let database: GatewayDatabase;
  let other: SQLite.Database;
  let health: DependencyHealth;
  /** Calls that took kysely's path (a direct run never calls it). */
  let throughKysely: jest.SpyInstance;
  const committedIds = () => (other.prepare('SELECT id FROM generations ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id);
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  beforeEach(async () => {
    throwaway = await createThrowawayDatabase('sqlite');
    health = new DependencyHealth({ now: () => Date.now() }, pino({ level: 'silent' }));
    database = openDatabase(throwaway.url, { health });
    await migrateToLatest(database.db as never, 'sqlite');
    other = new SQLite(throwaway.url, { readonly: true });
    throughKysely = jest.spyOn(Kysely.prototype, 'executeQuery');
  });
  afterEach(async () => {
    throughKysely.mockRestore();
    other.close();
    await database.close();
    await throwaway.drop();
  });

  it('on a group-commit transaction: run directly, part of it, rolled back with it', async () => {
    await expect(
      database.writes.run(async (trx) => {
        await insertGeneration(trx, generationRow('gen_inside'));
        expect(throughKysely).not.toHaveBeenCalled();
        // The transaction sees its own uncommitted row through kysely as well.
        expect((await trx.selectFrom('generations').select('id').execute()).map((r) => r.id)).toEqual(['gen_inside']);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(committedIds()).toEqual([]);
  });

  it("a compiled query given to a group-commit transaction's executeQuery: run directly, part of it; after it ended, kysely's refusal", async () => {
    let ended: Kysely<never> | undefined;
    const insert = (db: Kysely<never>, id: string) =>
      db.executeQuery(
        CompiledQuery.raw(
          'INSERT INTO generation_attempts (generation_id, seq, image_index, channel_id, outcome, latency_ms, started_at) VALUES (?, 0, 0, ?, ?, 1, 1)',
          [id, 'env-local', 'succeeded'],
        ),
      );
    await expect(
      database.writes.run(async (trx) => {
        ended = trx as never;
        const result = await insert(trx as never, 'gen_raw');
        expect(result.numAffectedRows).toBe(1n);
        expect(throughKysely).not.toHaveBeenCalled();
        // A builder still takes kysely's path, inside the same transaction.
        expect((await trx.selectFrom('generation_attempts').select('generation_id').execute()).map((r) => r.generation_id)).toEqual(['gen_raw']);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(other.prepare('SELECT count(*) AS n FROM generation_attempts').get()).toEqual({ n: 0 });
    // kysely throws at the call (not in the promise) for a transaction that has ended.
    await expect((async () => insert(ended as never, 'gen_late'))()).rejects.toThrow(/already rolled back/);
  });

  it('on a transaction that has ended: refused as kysely refuses it, never run in whatever transaction is open then', async () => {
    let ended: Kysely<never> | undefined;
    await database.writes.run(async (trx) => {
      ended = trx as never;
    });
    await expect(insertGeneration(ended as never, generationRow('gen_late'))).rejects.toThrow(/already committed/);
    await database.writes.run(async () => {
      await expect(insertGeneration(ended as never, generationRow('gen_late'))).rejects.toThrow(/already committed/);
    });
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
    expect(throughKysely).toHaveBeenCalled();
  });

  it('on the database with no transaction open: run directly; the result as kysely gives it (affected rows as a bigint)', async () => {
    await insertGeneration(database.db, generationRow('gen_a'));
    const setRuns = preparedQuery<{ id: string }, never>(['id'], (db, p) => db.updateTable('generations').set({ runs: 5 }).where('id', '=', p.id));
    const result = await setRuns(database.db, { id: 'gen_a' });
    expect(result.numAffectedRows).toBe(1n);
    expect(throughKysely).not.toHaveBeenCalled();
    // With a plugin (which may transform results): kysely's path.
    const withPlugin = database.db.withPlugin({ transformQuery: (args) => args.node, transformResult: async (args) => args.result });
    expect((await setRuns(withPlugin, { id: 'gen_a' })).numAffectedRows).toBe(1n);
    expect(throughKysely).toHaveBeenCalledTimes(1);
  });

  it('results as kysely gives them: affected rows of a write, rows of a read', async () => {
    await insertGeneration(database.db, generationRow('gen_a', { status: 'running' }));
    expect(await completeGeneration(database.db, 'gen_a', { status: 'succeeded', errorCode: null, latencyMs: 5, completedAt: 1 })).toBe(true);
    // Settled already: the conditional UPDATE changes no row.
    expect(await completeGeneration(database.db, 'gen_a', { status: 'failed', errorCode: 'x', latencyMs: 5, completedAt: 2 })).toBe(false);
    const attempt = {
      generation_id: 'gen_a',
      seq: 0,
      image_index: 0,
      channel_id: 'env-local',
      outcome: 'succeeded',
      error_code: null,
      latency_ms: 5,
      started_at: 1,
      model: 'local-1',
    };
    await insertAttempts(database.db, [attempt]);
    // A row already there is kept (ON CONFLICT DO NOTHING), not an error.
    await insertAttempts(database.db, [{ ...attempt, outcome: 'failed' }]);
    expect(await database.db.selectFrom('generation_attempts').selectAll().execute()).toEqual([{ ...attempt, upstream_usage: null }]);
  });

  it("errors as kysely's path gives them: a statement's own error as SQLite raised it, an unusable file as dependency_unavailable", async () => {
    await insertGeneration(database.db, generationRow('gen_taken'));
    await expect(insertGeneration(database.db, generationRow('gen_taken'))).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(health.lastFailure('database')).toBeUndefined();
    await sql`PRAGMA query_only = 1`.execute(database.db);
    throughKysely.mockClear();
    await expect(insertGeneration(database.db, generationRow('gen_b'))).rejects.toMatchObject({ name: 'DependencyUnavailableError' });
    expect(throughKysely).not.toHaveBeenCalled();
    // Reported, as kysely's path reports it (/readyz reads this).
    expect(health.lastFailure('database')).toEqual(expect.any(Number));
  });
});
