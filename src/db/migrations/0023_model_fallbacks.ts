import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // Model fallbacks (issue #36 §5): a generation that continued on another model of its chain keeps
  // the model its client asked for (`model` and `provider` name the one that ran last and, when it
  // succeeded, delivered); each channel attempt names the model it was a call for.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').addColumn('requested_model', 'varchar(100)').execute();
    await db.schema.alterTable('generation_attempts').addColumn('model', 'varchar(100)').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('generation_attempts').dropColumn('model').execute();
    await db.schema.alterTable('generations').dropColumn('requested_model').execute();
  },
};
