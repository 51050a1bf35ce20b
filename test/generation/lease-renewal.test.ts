import pino from 'pino';
import type { GatewayDatabase } from '../../src/db/database';
import type { GenerationsTable } from '../../src/db/schema';
import { GenerationWorker } from '../../src/generation/generation-worker';
import { LeaseLost } from '../../src/generation/lease';
import { insertGeneration } from '../../src/generation/generations.repository';
import { systemClock } from '../../src/shared/clock';
import { generationRow, migratedDatabase } from '../helpers/generation-rows';
import { testEngine } from '../helpers/test-database';
import { unlessStalled } from '../helpers/unless-stalled';
import { until } from '../helpers/until';

const LEASE_MS = 300;

/**
 * The leases of the generations a process runs are renewed by one timer, in statements of up to
 * 500 rows: a process holding thousands of slow generations must not send one statement per
 * generation every few seconds. Run on the suite's engine (TEST_DB=postgres runs it on PostgreSQL).
 */
describe(`lease renewal of held generations (${testEngine})`, () => {
  let database: GatewayDatabase;
  let drop: () => Promise<void>;
  let worker: GenerationWorker;

  const heldRow = (id: string): GenerationsTable =>
    generationRow(id, { credits: 0, status: 'running', lease_owner: worker.owner, lease_expires_at: Date.now() + LEASE_MS, started_at: 0, runs: 1 });

  /** Holds `rows` until `release` is called; each run's outcome is recorded (its abort reason, or 'finished'). */
  async function holdAll(rows: GenerationsTable[]) {
    for (let at = 0; at < rows.length; at += 200) {
      await database.writes.run(async (trx) => {
        for (const row of rows.slice(at, at + 200)) await insertGeneration(trx, row);
      });
    }
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const outcomes = new Map<string, 'finished' | LeaseLost | unknown>();
    const runs = rows.map((row) =>
      worker
        .holdLocal(row, new AbortController().signal, (_row, signal) =>
          Promise.race([released, new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }))]),
        )
        .then(
          () => outcomes.set(row.id, 'finished'),
          (error: unknown) => outcomes.set(row.id, error),
        ),
    );
    return { outcomes, release, all: () => Promise.all(runs) };
  }

  const leaseOf = async (id: string) =>
    Number((await database.db.selectFrom('generations').select('lease_expires_at').where('id', '=', id).executeTakeFirstOrThrow()).lease_expires_at);

  beforeEach(async () => {
    ({ database, drop } = await migratedDatabase());
    worker = new GenerationWorker({
      db: database.db,
      clock: systemClock,
      logger: pino({ level: 'silent' }),
      leaseMs: LEASE_MS,
      pollMs: 60_000,
      maxRunning: 1,
      modelsWithRoom: async () => [],
      execute: async () => undefined,
    });
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await drop();
  });

  it('keeps 1,200 held generations leased past several lease periods, in one statement per 500 rows a round', async () => {
    // The renewal is the only UPDATE while the rows are held.
    const renew = jest.spyOn(database.db, 'updateTable');
    // Renewed every LEASE_MS / 3, a lease runs out only when this process stalls for about 2/3 of it.
    await unlessStalled(LEASE_MS / 2, async (round) => {
      const rows = Array.from({ length: 1200 }, (_, i) => heldRow(`gen_many_${round}_${String(i).padStart(4, '0')}`));
      const held = await holdAll(rows);
      try {
        renew.mockClear();
        const started = Date.now();
        await new Promise((resolve) => setTimeout(resolve, LEASE_MS * 4));
        // Every lease still runs out in the future: renewed while held, none lost.
        const now = Date.now();
        for (const id of [rows[0]!.id, rows[599]!.id, rows[1199]!.id]) expect(await leaseOf(id)).toBeGreaterThan(now);
        expect(held.outcomes.size).toBe(0);
        // Rounds every LEASE_MS / 3 ms: 3 statements each (500 + 500 + 200), never one per row.
        const rounds = Math.floor((Date.now() - started) / (LEASE_MS / 3));
        expect(renew.mock.calls.length).toBeGreaterThanOrEqual(3);
        expect(renew.mock.calls.length).toBeLessThanOrEqual(3 * (rounds + 2));
      } finally {
        held.release();
        await held.all();
      }
      expect([...held.outcomes.values()].every((outcome) => outcome === 'finished')).toBe(true);
    });
  }, 30_000);

  it('aborts the run whose lease another process took, and the run whose cancel was requested; the others go on', async () => {
    await unlessStalled(LEASE_MS / 2, async (round) => {
      const [takenId, canceledId, keptId] = ['gen_taken', 'gen_canceled', 'gen_kept'].map((id) => `${id}_${round}`) as [string, string, string];
      const held = await holdAll([takenId, canceledId, keptId].map(heldRow));
      try {
        await database.db.updateTable('generations').set({ lease_owner: 'another-process' }).where('id', '=', takenId).execute();
        await database.db.updateTable('generations').set({ cancel_requested: 1 }).where('id', '=', canceledId).execute();
        await until(() => held.outcomes.size === 2, 'the renewal to find the taken and the canceled run', 5000);
        const taken = held.outcomes.get(takenId);
        const canceled = held.outcomes.get(canceledId);
        expect(taken).toBeInstanceOf(LeaseLost);
        expect((taken as LeaseLost).canceled).toBe(false);
        expect(canceled).toBeInstanceOf(LeaseLost);
        expect((canceled as LeaseLost).canceled).toBe(true);
        // The third is still held and renewed.
        await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
        expect(held.outcomes.has(keptId)).toBe(false);
        expect(await leaseOf(keptId)).toBeGreaterThan(Date.now());
      } finally {
        held.release();
        await held.all();
      }
      expect(held.outcomes.get(keptId)).toBe('finished');
    });
  });

  it('stops renewing once nothing is held, and renews again when something is', async () => {
    const renew = jest.spyOn(database.db, 'updateTable');
    const first = await holdAll([heldRow('gen_first')]);
    await until(() => renew.mock.calls.length > 0, 'a first renewal');
    first.release();
    await first.all();
    const callsWhenIdle = renew.mock.calls.length;
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    expect(renew.mock.calls.length).toBe(callsWhenIdle);
    const second = await holdAll([heldRow('gen_second')]);
    await until(() => renew.mock.calls.length > callsWhenIdle, 'the renewal of the second hold');
    expect(await leaseOf('gen_second')).toBeGreaterThan(Date.now());
    second.release();
    await second.all();
  });

  it('a failed renewal round is retried by the next; the leases outlive it', async () => {
    const renew = jest.spyOn(database.db, 'updateTable').mockImplementationOnce(() => {
      throw new Error('database hiccup');
    });
    const held = await holdAll([heldRow('gen_hiccup')]);
    await until(() => renew.mock.calls.length >= 2, 'a second renewal round');
    expect(held.outcomes.size).toBe(0);
    expect(await leaseOf('gen_hiccup')).toBeGreaterThan(Date.now());
    held.release();
    await held.all();
  });
});
