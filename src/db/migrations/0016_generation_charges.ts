import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // What a generation that delivered nothing still cost (issue #29): credits kept by a cancel or
  // disconnect after its upstream calls were sent, and images made upstream that no key paid
  // for (the operator's loss), with the reason.
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('generations')
      .addColumn('charged_credits', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('generations')
      .addColumn('unbilled_images', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('generations').addColumn('unbilled_reason', 'varchar(64)').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').dropColumn('unbilled_reason').execute();
    await db.schema.alterTable('generations').dropColumn('unbilled_images').execute();
    await db.schema.alterTable('generations').dropColumn('charged_credits').execute();
  },
};
