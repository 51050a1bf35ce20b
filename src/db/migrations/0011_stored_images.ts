import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // One row per image the gateway stored (its bytes are in the image store under its id). After
  // the sweeper deletes the bytes the row stays a day as a tombstone, so even a replica whose
  // clock lags answers 410 for its URLs, not 404.
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('stored_images')
      .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('generation_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('position', 'integer', (c) => c.notNull())
      .addColumn('content_type', 'varchar(32)', (c) => c.notNull())
      .addColumn('byte_size', 'bigint', (c) => c.notNull())
      .addColumn('sha256', 'varchar(64)', (c) => c.notNull())
      .addColumn('width', 'integer', (c) => c.notNull())
      .addColumn('height', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('deleted_at', 'bigint')
      .execute();
    await db.schema.createIndex('stored_images_generation_idx').on('stored_images').columns(['generation_id', 'position']).execute();
    await db.schema.createIndex('stored_images_live_expiry_idx').on('stored_images').column('expires_at').where(sql.ref('deleted_at'), 'is', null).execute();
    await db.schema.createIndex('stored_images_deleted_idx').on('stored_images').column('deleted_at').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('stored_images').execute();
  },
};
