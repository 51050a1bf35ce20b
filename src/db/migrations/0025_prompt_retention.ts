import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // What is kept of a settled generation's prompt (src/maintenance/prompt-retention.ts): null while
  // the stored request still holds it, else the policy that was applied (`hash`, `none`).
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').addColumn('prompt_retention', 'varchar(8)').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').dropColumn('prompt_retention').execute();
  },
};
