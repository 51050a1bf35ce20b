import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // The sweeper only looks for pending rows: index just those, so settling a generation removes
  // one small entry instead of moving it within an index of every status.
  async up(db: Kysely<unknown>) {
    await db.schema.dropIndex('generations_status_idx').execute();
    await db.schema
      .createIndex('generations_pending_idx')
      .on('generations')
      .columns(['provider', 'created_at'])
      .where(sql.ref('status'), '=', 'pending')
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('generations_pending_idx').execute();
    await db.schema.createIndex('generations_status_idx').on('generations').columns(['status', 'created_at']).execute();
  },
};
