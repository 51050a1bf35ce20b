import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';
import { capabilitiesOf, POSTGRES_CAPABILITIES, SQLITE_CAPABILITIES, type StorageCapabilities } from '../../src/db/storage-capabilities';

/** A handle that compiles and never connects (DummyDriver), with the adapter of one engine. */
function handleOf(engine: 'postgres' | 'sqlite'): Kysely<Record<string, never>> {
  return new Kysely<Record<string, never>>({
    dialect:
      engine === 'postgres'
        ? {
            createAdapter: () => new PostgresAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (db) => new PostgresIntrospector(db),
            createQueryCompiler: () => new PostgresQueryCompiler(),
          }
        : {
            createAdapter: () => new SqliteAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (db) => new SqliteIntrospector(db),
            createQueryCompiler: () => new SqliteQueryCompiler(),
          },
  });
}

describe('storage capabilities', () => {
  it('PostgreSQL has row locks, SKIP LOCKED, advisory locks, one-statement writes and transaction settings, and is shared across hosts', () => {
    expect(POSTGRES_CAPABILITIES).toEqual<StorageCapabilities>({
      label: 'PostgreSQL',
      rowLocks: true,
      skipLocked: true,
      advisoryLocks: true,
      oneStatementWrites: true,
      transactionSettings: true,
      sharedAcrossHosts: true,
    });
  });

  it('SQLite has none of them: one writer at a time, on one host', () => {
    expect(SQLITE_CAPABILITIES).toEqual<StorageCapabilities>({
      label: 'SQLite',
      rowLocks: false,
      skipLocked: false,
      advisoryLocks: false,
      oneStatementWrites: false,
      transactionSettings: false,
      sharedAcrossHosts: false,
    });
  });

  it('cannot be changed by a caller', () => {
    expect(Object.isFrozen(POSTGRES_CAPABILITIES)).toBe(true);
    expect(Object.isFrozen(SQLITE_CAPABILITIES)).toBe(true);
  });

  it.each([
    ['postgres', POSTGRES_CAPABILITIES],
    ['sqlite', SQLITE_CAPABILITIES],
  ] as const)('capabilitiesOf() tells %s from a handle and from its transactions', async (engine, expected) => {
    const db = handleOf(engine);
    expect(capabilitiesOf(db)).toBe(expected);
    await expect(db.transaction().execute(async (trx) => capabilitiesOf(trx))).resolves.toBe(expected);
    await db.destroy();
  });
});
