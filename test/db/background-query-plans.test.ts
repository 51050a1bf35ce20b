import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { type CompiledQuery, Kysely, SqliteDialect } from 'kysely';
import { migrateToLatest } from '../../src/db/migrations';
import type { Database } from '../../src/db/schema';
import { claimableModels, claimNextGeneration, pruneSettledTasks } from '../../src/generation/durable.repository';
import { findStalePendingGenerations } from '../../src/generation/generations.repository';
import { testEngine } from '../helpers/test-database';

/**
 * The workers and the sweeper poll the generations table every few hundred milliseconds, and the
 * table keeps every generation ever made. Each poll must go through the partial index of active rows
 * (SQLite uses it only when the query repeats its term with the same literals), never scan the table:
 * measured before the fix, 2.6 ms a poll after one benchmark run, growing with the table.
 * PostgreSQL's planner proves the implication itself and picks by cost, so this is checked on SQLite.
 */
(testEngine === 'sqlite' ? describe : describe.skip)('background queries of the generations table (SQLite plans)', () => {
  let dir: string;
  let sqlite: SQLite.Database;
  let db: Kysely<Database>;
  const seen: CompiledQuery[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-plans-'));
    sqlite = new SQLite(path.join(dir, 'gateway.db'));
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }), log: (event) => void seen.push(event.query) });
    await migrateToLatest(db as unknown as Kysely<unknown>, 'sqlite');
  });
  afterAll(async () => {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The plan of every statement `run` sent. */
  async function plansOf(run: () => Promise<unknown>): Promise<string[][]> {
    seen.length = 0;
    await run();
    return seen.map((query) =>
      sqlite
        .prepare(`EXPLAIN QUERY PLAN ${query.sql}`)
        .all(...(query.parameters as unknown[]))
        .map((row) => (row as { detail: string }).detail),
    );
  }

  it.each([
    ['the worker asking which models have claimable work', () => claimableModels(db)],
    ['the worker claiming the oldest claimable row', () => claimNextGeneration(db, 'owner', ['local-1'], Date.now(), 30_000)],
    ['the sweeper looking for stale running rows', () => findStalePendingGenerations(db, 'local', Date.now(), 100)],
    ['the journal pruning rows of settled generations', () => pruneSettledTasks(db)],
  ])('%s: uses an index, no scan of generations', async (_name, run) => {
    const plans = await plansOf(run);
    expect(plans.length).toBeGreaterThan(0);
    for (const plan of plans) {
      expect(plan.filter((detail) => /^SCAN generations\b/.test(detail))).toEqual([]);
      expect(plan.some((detail) => /generations_active_idx|sqlite_autoindex_generations_1/.test(detail))).toBe(true);
    }
  });
});
