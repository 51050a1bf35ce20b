import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // A key's usage counter is a book numbered by usage_epoch: reset_usage and every roll-over to a
  // new period open the next one. A generation records the book it was charged to, and its
  // release only touches that book. Keys start at book 1; a generation already pending at
  // upgrade keeps book 1 if it was reserved in the key's stored period (the old rule compared
  // period starts), else book 0, which no key has, so its release changes nothing.
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('api_keys')
      .addColumn('usage_epoch', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('generations').addColumn('usage_epoch', 'bigint').execute();
    await sql`UPDATE api_keys SET usage_epoch = 1`.execute(db);
    await sql`UPDATE generations SET usage_epoch = CASE WHEN period_started_at =
          (SELECT k.period_started_at FROM api_keys k WHERE k.id = generations.key_id) THEN 1 ELSE 0 END
          WHERE key_id IS NOT NULL`.execute(db);
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').dropColumn('usage_epoch').execute();
    await db.schema.alterTable('api_keys').dropColumn('usage_epoch').execute();
  },
};
