import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // Upstream accounts (channels), the attempts of each generation, and the SQL store of channel
  // limits (leases for concurrency, one row per call for rpm/ipm) used when there is no Redis.
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('channels')
      .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('name', 'varchar(200)', (c) => c.notNull())
      .addColumn('provider', 'varchar(32)', (c) => c.notNull())
      .addColumn('transport', 'varchar(16)', (c) => c.notNull())
      .addColumn('base_url', 'varchar(500)', (c) => c.notNull())
      .addColumn('models', 'text', (c) => c.notNull())
      .addColumn('priority', 'integer', (c) => c.notNull())
      .addColumn('weight', 'integer', (c) => c.notNull())
      .addColumn('status', 'varchar(16)', (c) => c.notNull())
      .addColumn('disabled_reason', 'varchar(500)')
      .addColumn('disabled_at', 'bigint')
      .addColumn('max_concurrency', 'integer')
      .addColumn('rpm', 'integer')
      .addColumn('ipm', 'integer')
      .addColumn('timeout_ms', 'integer', (c) => c.notNull())
      .addColumn('credentials_sealed', 'text', (c) => c.notNull())
      .addColumn('credentials_hint', 'varchar(64)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('generation_attempts')
      .addColumn('generation_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('seq', 'integer', (c) => c.notNull())
      .addColumn('image_index', 'integer', (c) => c.notNull())
      .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('outcome', 'varchar(16)', (c) => c.notNull())
      .addColumn('error_code', 'varchar(64)')
      .addColumn('latency_ms', 'integer', (c) => c.notNull())
      .addColumn('started_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('generation_attempts_pk', ['generation_id', 'seq'])
      .execute();
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
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('channel_calls').execute();
    await db.schema.dropTable('channel_leases').execute();
    await db.schema.dropTable('generation_attempts').execute();
    await db.schema.dropTable('channels').execute();
  },
};
