import { type Kysely, type Migration, sql } from 'kysely';

/** The state of every shared limit, as it was before this migration, in `leases` (scope, lease_id, units, expires_at). */
const COPIES = [
  // A key's requests per minute: a request counts until a minute after it.
  sql`SELECT 'key:' || key_id || ':rpm', 'm' || CAST(row_number() OVER (ORDER BY at) AS varchar(20)), 1, at + 60000 FROM rate_limit_hits`,
  sql`SELECT 'key:' || key_id || ':concurrency', lease_id, 1, expires_at FROM key_leases`,
  sql`SELECT 'channel:' || channel_id || ':concurrency', lease_id, 1, expires_at FROM channel_leases`,
  sql`SELECT 'channel:' || channel_id || ':calls', 'm' || CAST(row_number() OVER (ORDER BY at) AS varchar(20)), 1, at + 60000 FROM channel_calls`,
  sql`SELECT 'channel:' || channel_id || ':images', 'm' || CAST(row_number() OVER (ORDER BY at) AS varchar(20)), images, at + 60000 FROM channel_calls WHERE images > 0`,
  sql`SELECT 'channel:' || id || ':cooldown', 'm', 1, cooldown_until FROM channels WHERE cooldown_until IS NOT NULL`,
  sql`SELECT 'shared:' || name || ':holder', holder, 1, expires_at FROM shared_leases`,
];

export const migration: Migration = {
  // One table for every shared limit (src/leases/): rate-limit windows, key and channel slots,
  // channel calls and images per minute, channel cool-downs and the probe lease. Their state
  // moves over, so limits hold across the upgrade.
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('leases')
      .addColumn('scope', 'varchar(128)', (c) => c.notNull())
      .addColumn('lease_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('units', 'integer', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('leases_pk', ['scope', 'lease_id'])
      .execute();
    await db.schema.createIndex('leases_scope_expires_idx').on('leases').columns(['scope', 'expires_at']).execute();
    for (const rows of COPIES) await sql`INSERT INTO leases (scope, lease_id, units, expires_at) ${rows}`.execute(db);
    for (const table of ['rate_limit_hits', 'key_leases', 'channel_leases', 'channel_calls', 'shared_leases']) await db.schema.dropTable(table).execute();
    await db.schema.alterTable('channels').dropColumn('cooldown_until').execute();
  },
  // Back to the tables of 0017, empty: what they held lapses within minutes anyway.
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('channels').addColumn('cooldown_until', 'bigint').execute();
    await db.schema
      .createTable('rate_limit_hits')
      .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('rate_limit_hits_key_at_idx').on('rate_limit_hits').columns(['key_id', 'at']).execute();
    await db.schema
      .createTable('key_leases')
      .addColumn('lease_id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('key_leases_key_idx').on('key_leases').columns(['key_id', 'expires_at']).execute();
    await db.schema
      .createTable('channel_leases')
      .addColumn('lease_id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('channel_leases_channel_idx').on('channel_leases').columns(['channel_id', 'expires_at']).execute();
    await db.schema
      .createTable('channel_calls')
      .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('at', 'bigint', (c) => c.notNull())
      .addColumn('images', 'integer', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('channel_calls_channel_at_idx').on('channel_calls').columns(['channel_id', 'at']).execute();
    await db.schema
      .createTable('shared_leases')
      .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('holder', 'varchar(64)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.dropTable('leases').execute();
  },
};
