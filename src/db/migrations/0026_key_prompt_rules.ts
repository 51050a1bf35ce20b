import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // A key's prompt rules (src/guardrails/prompt-rules.ts), JSON; null = none.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('api_keys').addColumn('prompt_rules', 'text').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('api_keys').dropColumn('prompt_rules').execute();
  },
};
