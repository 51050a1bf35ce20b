import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('admin_tokens')
      .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('token_hash', 'varchar(64)', (c) => c.notNull().unique())
      .addColumn('hint', 'varchar(64)', (c) => c.notNull())
      .addColumn('name', 'varchar(200)', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('created_by', 'varchar(200)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('admin_tokens_created_idx').on('admin_tokens').columns(['created_at', 'id']).execute();

    await db.schema
      .createTable('audit_events')
      .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('actor', 'varchar(200)', (c) => c.notNull())
      .addColumn('action', 'varchar(81)', (c) => c.notNull())
      .addColumn('target', 'varchar(200)', (c) => c.notNull())
      .addColumn('before', 'text')
      .addColumn('after', 'text')
      .addColumn('request_id', 'varchar(200)', (c) => c.notNull())
      .addColumn('client_ip', 'varchar(64)', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('audit_events_created_idx').on('audit_events').columns(['created_at', 'id']).execute();
    for (const column of ['actor', 'target', 'action'] as const) {
      await db.schema.createIndex(`audit_events_${column}_idx`).on('audit_events').columns([column, 'created_at', 'id']).execute();
    }
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('audit_events').execute();
    await db.schema.dropTable('admin_tokens').execute();
  },
};
