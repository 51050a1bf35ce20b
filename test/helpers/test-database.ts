import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { randomBase62 } from '../../src/shared/ids';

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * `npm run test:sqlite` (TEST_SQLITE_ONLY=1): the suite on a machine without PostgreSQL and Redis;
 * the tests that need them are skipped (and listed as skipped).
 */
export const sqliteOnly = process.env.TEST_SQLITE_ONLY === '1';
/** `describe`, or `describe.skip` when PostgreSQL and Redis are not available. */
export const describeWithServices = sqliteOnly ? describe.skip : describe;

/** The engine the suite runs on: `TEST_DB=postgres` runs the same tests on PostgreSQL. */
export const testEngine: 'sqlite' | 'postgres' = process.env.TEST_DB === 'postgres' ? 'postgres' : 'sqlite';

export interface ThrowawayDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh database for one test gateway: a temp SQLite file, or a new PostgreSQL database. */
export async function createThrowawayDatabase(engine = testEngine): Promise<ThrowawayDatabase> {
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-test-'));
    return { url: path.join(dir, 'gateway.db'), drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `cgw_test_${randomBase62(10).toLowerCase()}`;
  const admin = new Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
  return {
    url,
    drop: async () => {
      const client = new Client({ connectionString: PG_ADMIN_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
