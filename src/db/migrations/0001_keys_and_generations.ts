import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('key_hash', 'varchar(64)', (c) => c.notNull().unique())
      .addColumn('hint', 'varchar(64)', (c) => c.notNull())
      .addColumn('name', 'varchar(200)', (c) => c.notNull())
      .addColumn('owner', 'varchar(200)', (c) => c.notNull())
      .addColumn('status', 'varchar(16)', (c) => c.notNull())
      .addColumn('credits_quota', 'bigint', (c) => c.notNull())
      .addColumn('credits_used', 'bigint', (c) => c.notNull())
      .addColumn('quota_period_days', 'integer', (c) => c.notNull())
      .addColumn('period_started_at', 'bigint', (c) => c.notNull())
      .addColumn('rate_limit_rpm', 'integer', (c) => c.notNull())
      .addColumn('allowed_providers', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'bigint')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addColumn('disabled_at', 'bigint')
      .addColumn('last_used_at', 'bigint')
      .execute();
    await db.schema.createIndex('api_keys_created_idx').on('api_keys').columns(['created_at', 'id']).execute();
    await db.schema.createIndex('api_keys_owner_idx').on('api_keys').columns(['owner', 'created_at']).execute();

    await db.schema
      .createTable('generations')
      .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('model', 'varchar(100)', (c) => c.notNull())
      .addColumn('provider', 'varchar(32)', (c) => c.notNull())
      .addColumn('images', 'integer', (c) => c.notNull())
      .addColumn('credits', 'bigint', (c) => c.notNull())
      .addColumn('status', 'varchar(16)', (c) => c.notNull())
      .addColumn('error_code', 'varchar(64)')
      .addColumn('latency_ms', 'integer')
      .addColumn('period_started_at', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('completed_at', 'bigint')
      .execute();
    await db.schema.createIndex('generations_key_idx').on('generations').columns(['key_id', 'created_at']).execute();
    await db.schema.createIndex('generations_status_idx').on('generations').columns(['status', 'created_at']).execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('generations').execute();
    await db.schema.dropTable('api_keys').execute();
  },
};
