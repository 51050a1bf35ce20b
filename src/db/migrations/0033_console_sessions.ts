import type { Kysely, Migration } from 'kysely';

export const migration: Migration = {
  // Console single sign-on: the short-lived state of a sign-in under way (PKCE verifier, nonce),
  // consumed by its callback, and the sessions the console's cookie names, in the database so that
  // every replica sees a sign-in, a use and a revocation at once.
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('console_sso_logins')
      .addColumn('state_hash', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('issuer_id', 'varchar(32)', (c) => c.notNull())
      .addColumn('code_verifier', 'varchar(128)', (c) => c.notNull())
      .addColumn('nonce', 'varchar(128)', (c) => c.notNull())
      .addColumn('redirect_uri', 'varchar(2048)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('console_sso_logins_expires_at_idx').on('console_sso_logins').column('expires_at').execute();
    await db.schema
      .createTable('console_sessions')
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('token_hash', 'varchar(64)', (c) => c.notNull().unique())
      .addColumn('csrf_hash', 'varchar(64)', (c) => c.notNull())
      .addColumn('issuer_id', 'varchar(32)', (c) => c.notNull())
      .addColumn('subject', 'varchar(255)', (c) => c.notNull())
      .addColumn('email', 'varchar(320)')
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('id_token', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('console_sessions_expires_at_idx').on('console_sessions').column('expires_at').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('console_sessions').execute();
    await db.schema.dropTable('console_sso_logins').execute();
  },
};
