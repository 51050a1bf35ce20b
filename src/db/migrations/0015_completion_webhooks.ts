import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // Completion webhooks (issue #17): a per-key signing secret (sealed, like endpoint secrets),
  // and deliveries of the outbox that go to a request's own URL instead of an endpoint:
  // target_url set, signed with signing_key_id's secret (endpoint_id then names that key).
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('key_webhook_secrets')
      .addColumn('key_id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('secret', 'varchar(300)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.alterTable('webhook_deliveries').addColumn('target_url', 'varchar(2000)').execute();
    await db.schema.alterTable('webhook_deliveries').addColumn('signing_key_id', 'varchar(64)').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('webhook_deliveries').dropColumn('signing_key_id').execute();
    await db.schema.alterTable('webhook_deliveries').dropColumn('target_url').execute();
    await db.schema.dropTable('key_webhook_secrets').execute();
  },
};
