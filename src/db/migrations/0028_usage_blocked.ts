import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // Requests the gateway's guardrails refused (400 prompt_blocked) count in usage analytics as their
  // own outcome (issue 38 §2): the rows per status and error code take them as status 'blocked';
  // usage_key_months, which keeps the outcomes as counts, needs a column for them.
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('usage_key_months')
      .addColumn('blocked', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('usage_key_months').dropColumn('blocked').execute();
  },
};
