import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // Busy cool-downs of channels seen by every replica, and named leases (the periodic channel
  // probe runs on one replica at a time), for replicas without Redis.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('channels').addColumn('cooldown_until', 'bigint').execute();
    await db.schema
      .createTable('shared_leases')
      .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('holder', 'varchar(64)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('shared_leases').execute();
    await db.schema.alterTable('channels').dropColumn('cooldown_until').execute();
  },
};
