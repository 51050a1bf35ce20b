import { type Kysely, type Migration } from 'kysely';

const ROLLUP_TABLES = ['usage_rollups', 'usage_rollup_totals', 'usage_key_days', 'usage_day_totals', 'usage_key_months'] as const;

export const migration: Migration = {
  // What the upstream is estimated to have billed for a generation, in US dollars, beside the
  // credits charged (src/usage/upstream-cost.ts): NULL when its model has no money price. The rollups
  // sum it (NULL while no generation of a row had a known cost) and the credits of the generations
  // whose cost is known, the two sides of a margin.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').addColumn('upstream_cost_usd', 'double precision').execute();
    for (const table of ROLLUP_TABLES) {
      await db.schema.alterTable(table).addColumn('upstream_cost_usd', 'double precision').execute();
      await db.schema
        .alterTable(table)
        .addColumn('costed_credits', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();
    }
  },
  async down(db: Kysely<unknown>) {
    for (const table of ROLLUP_TABLES) {
      await db.schema.alterTable(table).dropColumn('costed_credits').execute();
      await db.schema.alterTable(table).dropColumn('upstream_cost_usd').execute();
    }
    await db.schema.alterTable('generations').dropColumn('upstream_cost_usd').execute();
  },
};
