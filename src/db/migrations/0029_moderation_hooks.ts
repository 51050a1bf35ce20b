import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // The external moderation hook (issue 38 §2), per project: its settings as JSON
  // ({url, timeout_ms, failure_mode}) and its Standard Webhooks secret, sealed as webhook secrets are
  // (src/shared/sealing.ts, bound to the project id). A generation of a key whose project has one
  // records what the hook answered: the decision, its latency, the endpoint's reason, and why the
  // hook failed when the request went on anyway (fail_open). Null on every other generation.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('projects').addColumn('moderation_hook', 'text').execute();
    await db.schema.alterTable('projects').addColumn('moderation_hook_secret', 'text').execute();
    await db.schema.alterTable('generations').addColumn('moderation_decision', 'varchar(16)').execute();
    await db.schema.alterTable('generations').addColumn('moderation_latency_ms', 'integer').execute();
    await db.schema.alterTable('generations').addColumn('moderation_reason', 'text').execute();
    await db.schema.alterTable('generations').addColumn('moderation_failure', 'text').execute();
  },
  async down(db: Kysely<unknown>) {
    for (const column of ['moderation_failure', 'moderation_reason', 'moderation_latency_ms', 'moderation_decision']) {
      await db.schema.alterTable('generations').dropColumn(column).execute();
    }
    await db.schema.alterTable('projects').dropColumn('moderation_hook_secret').execute();
    await db.schema.alterTable('projects').dropColumn('moderation_hook').execute();
  },
};
