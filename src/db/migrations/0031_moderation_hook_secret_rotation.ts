import { type Kysely, type Migration } from 'kysely';

export const migration: Migration = {
  // A project's moderation hook secret can be rotated (rotateProjectModerationHookSecret): for an
  // overlap the hook's calls are signed with the new secret and the old one, as a webhook endpoint's
  // are, so the endpoint switches without refusing a call. The old secret stays sealed (bound to the
  // project id) until then.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('projects').addColumn('moderation_hook_previous_secret', 'text').execute();
    await db.schema.alterTable('projects').addColumn('moderation_hook_previous_secret_expires_at', 'bigint').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('projects').dropColumn('moderation_hook_previous_secret_expires_at').execute();
    await db.schema.alterTable('projects').dropColumn('moderation_hook_previous_secret').execute();
  },
};
