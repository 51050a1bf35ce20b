import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // An Idempotency-Key's claim is a lease: its owner (one request on one process) renews it while the
  // request runs, and once it lapses (the process died, or the record's removal after a failure did
  // not reach the database) a retry takes the key over instead of being told it is in use.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('idempotency_keys').addColumn('lease_owner', 'varchar(255)').execute();
    await db.schema
      .alterTable('idempotency_keys')
      .addColumn('lease_expires_at', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    // Claims made before leases: held as long as the sweeper used to keep them.
    await sql`UPDATE idempotency_keys SET lease_expires_at = created_at + 120000 WHERE state = 'running'`.execute(db);
    await db.schema.createIndex('idempotency_keys_lease_owner_idx').on('idempotency_keys').column('lease_owner').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('idempotency_keys_lease_owner_idx').execute();
    await db.schema.alterTable('idempotency_keys').dropColumn('lease_expires_at').execute();
    await db.schema.alterTable('idempotency_keys').dropColumn('lease_owner').execute();
  },
};
