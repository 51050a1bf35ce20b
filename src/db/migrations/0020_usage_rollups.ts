import { type CreateTableBuilder, type Kysely, type Migration } from 'kysely';

// The histogram columns as they were when this migration was written (lat_00 ... lat_47); a migration
// keeps its own copy so later code never rewrites what it created.
const LATENCY_COLUMNS: readonly string[] = Array.from({ length: 48 }, (_, i) => `lat_${String(i).padStart(2, '0')}`);

/**
 * The measures every rollup table keeps: counts, credits (a refund subtracts), images, and the
 * latency histogram, whose empty buckets are NULL (free in a row's null bitmap; most rows fill one or two).
 */
function withMeasures<T extends string, C extends string>(table: CreateTableBuilder<T, C>): CreateTableBuilder<T, string> {
  let built: CreateTableBuilder<T, string> = table
    .addColumn('requests', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('images', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('credits', 'bigint', (c) => c.notNull().defaultTo(0));
  for (const column of LATENCY_COLUMNS) built = built.addColumn(column, 'integer');
  return built;
}

export const migration: Migration = {
  // Usage analytics (issue #28 §1): rollups written in each settlement's transaction.
  // usage_rollups: one row per hour x key x model x provider x channel x outcome (status, error
  // code; '' for none). usage_rollup_totals: the same without the key, so questions about models,
  // providers and channels read a table whose size does not grow with the number of keys.
  // usage_key_days: per day x key x outcome, for questions about keys, owners and metadata over
  // whole days (a day's row sums a key's 24 hours, every model and channel).
  async up(db: Kysely<unknown>) {
    await withMeasures(
      db.schema
        .createTable('usage_rollups')
        .addColumn('hour_start', 'bigint', (c) => c.notNull())
        .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
        .addColumn('model', 'varchar(200)', (c) => c.notNull())
        .addColumn('provider', 'varchar(100)', (c) => c.notNull())
        .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('error_code', 'varchar(64)', (c) => c.notNull())
        .addPrimaryKeyConstraint('usage_rollups_pk', ['hour_start', 'key_id', 'model', 'provider', 'channel_id', 'status', 'error_code']),
    ).execute();
    // One key's (or a page of keys') rows over a range.
    await db.schema.createIndex('usage_rollups_key_idx').on('usage_rollups').columns(['key_id', 'hour_start']).execute();
    await withMeasures(
      db.schema
        .createTable('usage_rollup_totals')
        .addColumn('hour_start', 'bigint', (c) => c.notNull())
        .addColumn('model', 'varchar(200)', (c) => c.notNull())
        .addColumn('provider', 'varchar(100)', (c) => c.notNull())
        .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('error_code', 'varchar(64)', (c) => c.notNull())
        .addPrimaryKeyConstraint('usage_rollup_totals_pk', ['hour_start', 'model', 'provider', 'channel_id', 'status', 'error_code']),
    ).execute();
    await withMeasures(
      db.schema
        .createTable('usage_key_days')
        .addColumn('day_start', 'bigint', (c) => c.notNull())
        .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('error_code', 'varchar(64)', (c) => c.notNull())
        .addPrimaryKeyConstraint('usage_key_days_pk', ['day_start', 'key_id', 'status', 'error_code']),
    ).execute();
    await db.schema.createIndex('usage_key_days_key_idx').on('usage_key_days').columns(['key_id', 'day_start']).execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('usage_key_days').execute();
    await db.schema.dropTable('usage_rollup_totals').execute();
    await db.schema.dropTable('usage_rollups').execute();
  },
};
