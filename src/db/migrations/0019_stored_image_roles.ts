import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // Image inputs (issue #27) are stored like generated images, under the generation that took them:
  // `role` tells a generation's outputs from its inputs and its mask.
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('stored_images')
      .addColumn('role', 'varchar(16)', (c) => c.notNull().defaultTo('output'))
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('stored_images').dropColumn('role').execute();
  },
};
