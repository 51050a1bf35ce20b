import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { randomBase62 } from '../../src/shared/ids';
import { describeSkippedBecause } from './skip-reasons';

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * `npm run test:sqlite` (TEST_SQLITE_ONLY=1): the suite on a machine without PostgreSQL and Redis;
 * the tests that need them are skipped (and listed as skipped).
 */
export const sqliteOnly = process.env.TEST_SQLITE_ONLY === '1';
/** Why a test that needs PostgreSQL or Redis is skipped. */
export const SQLITE_ONLY_REASON = 'needs PostgreSQL or Redis: npm run test:sqlite (TEST_SQLITE_ONLY=1) leaves them out';
/** `describe`, or `describe.skip` when PostgreSQL and Redis are not available. */
export const describeWithServices: jest.Describe = sqliteOnly ? describeSkippedBecause(SQLITE_ONLY_REASON) : describe;

/** The engine the suite runs on: `TEST_DB=postgres` runs the same tests on PostgreSQL. */
export const testEngine: 'sqlite' | 'postgres' = process.env.TEST_DB === 'postgres' ? 'postgres' : 'sqlite';

export interface ThrowawayDatabase {
  url: string;
  drop(): Promise<void>;
}

export interface ThrowawayDatabaseOptions {
  /**
   * With every migration applied: a copy of a template migrated once (a SQLite file copied, or
   * PostgreSQL's `CREATE DATABASE ... TEMPLATE`), not the migrations run again for each test.
   */
  migrated?: boolean;
}

/** A fresh database for one test gateway: a temp SQLite file, or a new PostgreSQL database; empty unless `migrated`. */
export async function createThrowawayDatabase(engine = testEngine, options: ThrowawayDatabaseOptions = {}): Promise<ThrowawayDatabase> {
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-test-'));
    const url = path.join(dir, 'gateway.db');
    if (options.migrated) fs.copyFileSync(await sqliteTemplate(), url);
    return { url, drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const template = options.migrated ? await postgresTemplate() : undefined;
  const name = `cgw_test_${randomBase62(10).toLowerCase()}`;
  const admin = new Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
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

/**
 * Names the migrated templates: a hash of what decides their content (the migrations, how a database is
 * opened, kysely's version), so a change to any of them makes a new template, never a stale one used.
 */
const templateHash = (() => {
  const root = path.resolve(__dirname, '../..');
  const hash = createHash('sha256');
  const migrations = fs
    .readdirSync(path.join(root, 'src/db/migrations'))
    .sort()
    .map((name) => `src/db/migrations/${name}`);
  for (const file of [...migrations, 'src/db/database.ts', 'node_modules/kysely/package.json']) {
    hash.update(file).update(fs.readFileSync(path.join(root, file)));
  }
  return hash.digest('hex').slice(0, 16);
})();

let sqliteTemplateFile: Promise<string> | undefined;
let postgresTemplateName: Promise<string> | undefined;

/**
 * A SQLite file with every migration applied, made once (per machine and migrations): built under a
 * name of its own, then renamed into place, so concurrent workers never see half a template.
 */
function sqliteTemplate(): Promise<string> {
  sqliteTemplateFile ??= (async () => {
    const dir = path.join(os.tmpdir(), 'cgw-test-templates');
    const file = path.join(dir, `sqlite-${templateHash}.db`);
    if (fs.existsSync(file)) return file;
    fs.mkdirSync(dir, { recursive: true });
    const building = path.join(fs.mkdtempSync(path.join(dir, 'building-')), 'gateway.db');
    const database = openDatabase(building);
    try {
      await migrateToLatest(database.db as never, database.engine);
    } finally {
      await database.close();
    }
    // Closed: the WAL is checkpointed into the file, which alone is the whole database now.
    fs.renameSync(building, file);
    fs.rmSync(path.dirname(building), { recursive: true, force: true });
    return file;
  })();
  sqliteTemplateFile.catch(() => (sqliteTemplateFile = undefined));
  return sqliteTemplateFile;
}

/**
 * A PostgreSQL database with every migration applied, made once (per server and migrations): migrated
 * under a name of its own, then renamed to the template's name; a loser of that race drops its own.
 * Connections to the template are refused after, as `CREATE DATABASE ... TEMPLATE` needs.
 */
function postgresTemplate(): Promise<string> {
  postgresTemplateName ??= (async () => {
    const name = `cgw_template_${templateHash}`;
    const admin = new Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    try {
      const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (exists.rowCount) return name;
      const building = `cgw_building_${randomBase62(10).toLowerCase()}`;
      await admin.query(`CREATE DATABASE ${building}`);
      try {
        const database = openDatabase(PG_ADMIN_URL.replace(/\/[^/]*$/, `/${building}`), { statementTimeoutMs: 60_000 });
        try {
          await migrateToLatest(database.db as never, database.engine);
        } finally {
          await database.close();
        }
        await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
        await admin.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`);
      } catch (error) {
        await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
        // Another worker (or another run) made it first: theirs is as good.
        const made = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (!made.rowCount) throw error;
      }
      return name;
    } finally {
      await admin.end();
    }
  })();
  postgresTemplateName.catch(() => (postgresTemplateName = undefined));
  return postgresTemplateName;
}
