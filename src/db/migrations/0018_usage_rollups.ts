import { type CreateTableBuilder, type Kysely, type Migration } from 'kysely';
import { LATENCY_COLUMNS } from '../../usage/latency-histogram';

/** The measures both rollup tables keep: counts, credits (a refund subtracts), images, the latency histogram. */
function withMeasures<T extends string, C extends string>(table: CreateTableBuilder<T, C>): CreateTableBuilder<T, string> {
  let built: CreateTableBuilder<T, string> = table
    .addColumn('requests', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('images', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('credits', 'bigint', (c) => c.notNull().defaultTo(0));
  for (const column of LATENCY_COLUMNS) built = built.addColumn(column, 'integer', (c) => c.notNull().defaultTo(0));
  return built;
}

export const migration: Migration = {
  // Usage analytics (issue #28 §1): hourly rollups written in each settlement's transaction.
  // usage_rollups has one row per hour x key x model x provider x channel x outcome (status,
  // error code; '' for none), for questions about keys, owners and metadata; usage_rollup_totals
  // the same without the key, so questions about models, providers and channels read a table
  // whose size does not grow with the number of keys.
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
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('usage_rollup_totals').execute();
    await db.schema.dropTable('usage_rollups').execute();
  },
};
