import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // The tokens an upstream reports for a call (OpenAI's GPT image models bill by them): kept on the
  // attempt as the upstream's JSON, so an operator can reconcile the upstream's bill per call.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('generation_attempts').addColumn('upstream_usage', 'text').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('generation_attempts').dropColumn('upstream_usage').execute();
  },
};
