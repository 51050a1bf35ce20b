import { type Kysely, type Migration, sql } from 'kysely';
import type { DatabaseEngine } from '../database';

// The values of the usage code as they were when this migration was written; a migration keeps its
// own copy so later code never rewrites what it created.
const DAY_MS = 86_400_000;
const LATENCY_COLUMNS: readonly string[] = Array.from({ length: 48 }, (_, i) => `lat_${String(i).padStart(2, '0')}`);

/** The epoch milliseconds of the UTC calendar month `expression` (epoch milliseconds) falls in. */
function monthStartSql(expression: string, postgres: boolean): string {
  return postgres
    ? `CAST(extract(epoch FROM date_trunc('month', to_timestamp(${expression} / 1000) AT TIME ZONE 'UTC')) AS bigint) * 1000`
    : `CAST(strftime('%s', ${expression} / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000`;
}

export function migration(engine: DatabaseEngine): Migration {
  return {
    // Usage analytics at scale (issue #28): two coarser rollups, written in each settlement's
    // transaction like the others (src/usage/usage-rollups.repository.ts).
    // usage_key_months: per calendar month (UTC) x key, the outcomes as columns (no status or error
    // code rows, no histogram), so ranking every key over a quarter reads about one row per key and
    // month; failures by code and latency of the page's keys come from usage_key_days.
    // usage_day_totals: usage_rollup_totals per UTC day, for questions about models, providers and
    // channels over whole days. Both start with the sums of the rows already kept.
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('usage_key_months')
        .addColumn('month_start', 'bigint', (c) => c.notNull())
        .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
        .addColumn('requests', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('succeeded', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('failed', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('canceled', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('images', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('credits', 'bigint', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('usage_key_months_pk', ['month_start', 'key_id'])
        .execute();
      let dayTotals = db.schema
        .createTable('usage_day_totals')
        .addColumn('day_start', 'bigint', (c) => c.notNull())
        .addColumn('model', 'varchar(200)', (c) => c.notNull())
        .addColumn('provider', 'varchar(100)', (c) => c.notNull())
        .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('error_code', 'varchar(64)', (c) => c.notNull())
        .addColumn('requests', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('images', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('credits', 'bigint', (c) => c.notNull().defaultTo(0));
      for (const column of LATENCY_COLUMNS) dayTotals = dayTotals.addColumn(column, 'integer');
      await dayTotals.addPrimaryKeyConstraint('usage_day_totals_pk', ['day_start', 'model', 'provider', 'channel_id', 'status', 'error_code']).execute();

      const count = (status: string) => `sum(CASE WHEN status = '${status}' THEN requests ELSE 0 END)`;
      await sql
        .raw(
          `INSERT INTO usage_key_months (month_start, key_id, requests, succeeded, failed, canceled, images, credits) ` +
            `SELECT ${monthStartSql('day_start', engine === 'postgres')}, key_id, sum(requests), ${count('succeeded')}, ${count('failed')}, ${count('canceled')}, sum(images), sum(credits) ` +
            `FROM usage_key_days GROUP BY 1, 2`,
        )
        .execute(db);
      const latency = LATENCY_COLUMNS.join(', ');
      await sql
        .raw(
          `INSERT INTO usage_day_totals (day_start, model, provider, channel_id, status, error_code, requests, images, credits, ${latency}) ` +
            `SELECT hour_start - hour_start % ${DAY_MS}, model, provider, channel_id, status, error_code, sum(requests), sum(images), sum(credits), ` +
            `${LATENCY_COLUMNS.map((column) => `sum(${column})`).join(', ')} FROM usage_rollup_totals GROUP BY 1, 2, 3, 4, 5, 6`,
        )
        .execute(db);
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('usage_day_totals').execute();
      await db.schema.dropTable('usage_key_months').execute();
    },
  };
}
