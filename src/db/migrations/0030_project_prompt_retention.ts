import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // What is kept of a prompt, per project (issue 38 §3): a project may set its own prompt retention
  // (`full`, `hash` or `none`); null follows the gateway's PROMPT_RETENTION. The sweep applies it to
  // the settled generations charged to the project (generations.project_id).
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('projects').addColumn('prompt_retention', 'varchar(8)').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('projects').dropColumn('prompt_retention').execute();
  },
};
