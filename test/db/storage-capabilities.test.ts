import { type Kysely, sql } from 'kysely';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { capabilitiesOf, type StorageCapabilities } from '../../src/db/storage-capabilities';
import { createThrowawayDatabase, sqliteOnly, type ThrowawayDatabase } from '../helpers/test-database';

type Probed = Exclude<keyof StorageCapabilities, 'label' | 'sharedAcrossHosts'>;

/** What each capability lets the code write, run in a transaction of its own: it runs where the capability is claimed, fails where not. */
const PROBES: Record<Probed, (trx: Kysely<unknown>) => Promise<unknown>> = {
  rowLocks: (trx) => sql`SELECT id FROM capability_probe FOR UPDATE`.execute(trx),
  skipLocked: (trx) => sql`SELECT id FROM capability_probe FOR UPDATE SKIP LOCKED`.execute(trx),
  advisoryLocks: (trx) => sql`SELECT pg_advisory_xact_lock(1)`.execute(trx),
  oneStatementWrites: async (trx) => {
    await sql`WITH written AS (INSERT INTO capability_probe (id) VALUES (1) RETURNING id) INSERT INTO capability_probe (id) SELECT id + 1 FROM written`.execute(
      trx,
    );
    await sql`SELECT * FROM unnest(${[1, 2]}::integer[])`.execute(trx);
  },
  transactionSettings: (trx) => sql`SELECT set_config('work_mem', '64MB', true)`.execute(trx),
};

const engines: Array<'sqlite' | 'postgres'> = sqliteOnly ? ['sqlite'] : ['sqlite', 'postgres'];

describe.each(engines)('the storage capabilities of %s', (engine) => {
  let throwaway: ThrowawayDatabase;
  let database: GatewayDatabase;
  let db: Kysely<unknown>;

  beforeAll(async () => {
    throwaway = await createThrowawayDatabase(engine);
    database = openDatabase(throwaway.url);
    db = database.db as unknown as Kysely<unknown>;
    await sql`CREATE TABLE capability_probe (id integer PRIMARY KEY)`.execute(db);
  });
  afterAll(async () => {
    await database.close();
    await throwaway.drop();
  });

  it('are the same on the database object, its handle and its transactions', async () => {
    expect(database.capabilities.label).toBe(engine === 'postgres' ? 'PostgreSQL' : 'SQLite');
    expect(capabilitiesOf(database.db)).toBe(database.capabilities);
    await expect(database.db.transaction().execute(async (trx) => capabilitiesOf(trx))).resolves.toBe(database.capabilities);
  });

  it.each(Object.keys(PROBES) as Probed[])('%s: what it allows runs exactly where it is claimed', async (capability) => {
    const run = db.transaction().execute((trx) => PROBES[capability](trx));
    if (database.capabilities[capability]) await expect(run).resolves.not.toThrow();
    else await expect(run).rejects.toThrow();
  });

  it('sharedAcrossHosts: exactly the engine without a local signal of other processes’ writes (data_version)', () => {
    expect(database.dataVersion === undefined).toBe(database.capabilities.sharedAcrossHosts);
  });
});
