import SQLite from 'better-sqlite3';
import { openDatabase, type GatewayDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { GroupCommit } from '../../src/db/write-transactions';
import { insertGeneration } from '../../src/generation/generations.repository';
import { generationRow } from '../helpers/generation-rows';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';

const row = (id: string) => generationRow(id);

describe('GroupCommit (SQLite write batching)', () => {
  let throwaway: ThrowawayDatabase;
  let database: GatewayDatabase;
  let other: SQLite.Database;
  const idsSeenByAnotherConnection = () => (other.prepare('SELECT id FROM generations ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id);

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

  it('is what an SQLite database uses for the request path', () => {
    expect(database.writes).toBeInstanceOf(GroupCommit);
  });

  it('commits work queued in one turn in one transaction, and answers only once it is committed', async () => {
    const transaction = jest.spyOn(database.db, 'transaction');
    const ids = Array.from({ length: 20 }, (_, i) => `gen_${String(i).padStart(2, '0')}`);
    const done = ids.map((id) =>
      database.writes.run(async (trx) => {
        await insertGeneration(trx, row(id));
        return id;
      }),
    );
    // Each caller, once answered, finds its row committed (visible from another connection).
    const seenWhenAnswered = await Promise.all(done.map((p) => p.then((id) => idsSeenByAnotherConnection().includes(id))));
    expect(seenWhenAnswered).toEqual(ids.map(() => true));
    expect(transaction).toHaveBeenCalledTimes(1);
  });

  it('fails only the piece that failed; the rest of the batch commits', async () => {
    await database.writes.run((trx) => insertGeneration(trx, row('gen_taken')));
    const results = await Promise.allSettled([
      database.writes.run((trx) => insertGeneration(trx, row('gen_a'))),
      database.writes.run(async (trx) => {
        await insertGeneration(trx, row('gen_half_done'));
        await insertGeneration(trx, row('gen_taken')); // primary key taken: this piece fails
      }),
      database.writes.run((trx) => insertGeneration(trx, row('gen_b'))),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // The failed piece left nothing behind, not even its first insert.
    expect(idsSeenByAnotherConnection()).toEqual(['gen_a', 'gen_b', 'gen_taken']);
  });

  it('admit: a reservation whose turn comes later than the admission wait is refused and never run; other work waits its turn', async () => {
    const refusal = new Error('overloaded');
    const writes = new GroupCommit(database.db, 100, undefined, { waitMs: 50, refused: () => refusal });
    // Earlier work holds the writer 150 ms: what is queued behind it starts after the admission wait.
    const holding = writes.run(() => new Promise((resolve) => setTimeout(resolve, 150)));
    await new Promise((resolve) => setImmediate(resolve));
    const late = writes.admit((trx) => insertGeneration(trx, row('gen_late_reservation')));
    const settling = writes.run((trx) => insertGeneration(trx, row('gen_settlement')));
    await holding;
    await expect(late).rejects.toBe(refusal);
    await settling;
    expect(idsSeenByAnotherConnection()).toEqual(['gen_settlement']);
    // With the writer free, a reservation goes through.
    await writes.admit((trx) => insertGeneration(trx, row('gen_on_time')));
    expect(idsSeenByAnotherConnection()).toEqual(['gen_on_time', 'gen_settlement']);
  });

  it('bounds a batch: a burst larger than the batch size commits in several transactions', async () => {
    const writes = new GroupCommit(database.db, 10);
    const transaction = jest.spyOn(database.db, 'transaction');
    await Promise.all(Array.from({ length: 25 }, (_, i) => writes.run((trx) => insertGeneration(trx, row(`gen_${i}`)))));
    expect(transaction).toHaveBeenCalledTimes(3);
    expect(idsSeenByAnotherConnection()).toHaveLength(25);
  });
});
