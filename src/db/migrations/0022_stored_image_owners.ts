import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // A stored image carries who may name it as an input (an `img_` id): the key, or for the internal
  // API the service client, of the generation that stored it. The generation row alone cannot say
  // it: GENERATION_RETENTION_DAYS may delete that row while the image is still kept.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('stored_images').addColumn('key_id', 'varchar(64)').execute();
    await db.schema.alterTable('stored_images').addColumn('client_id', 'varchar(200)').execute();
    // Images whose generation row is already gone keep no owner: they could not be named before either.
    await sql`UPDATE stored_images SET
        key_id = (SELECT g.key_id FROM generations g WHERE g.id = stored_images.generation_id),
        client_id = (SELECT g.client_id FROM generations g WHERE g.id = stored_images.generation_id)`.execute(db);
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('stored_images').dropColumn('client_id').execute();
    await db.schema.alterTable('stored_images').dropColumn('key_id').execute();
  },
};
