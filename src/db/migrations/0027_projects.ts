import { type Kysely, type Migration, sql } from 'kysely';
import type { DatabaseEngine } from '../database';

export function migration(engine: DatabaseEngine): Migration {
  return {
    // Projects (issue #38 section 1): a budget above keys. A project's book has the same columns and
    // rules as a key's (credits_used in book usage_epoch, counting the period from period_started_at);
    // a generation of a project's key records which project book it reserved from, so a release only
    // refunds that book.
    async up(db: Kysely<unknown>) {
      const metadataType = engine === 'postgres' ? sql`jsonb` : sql`text`;
      await db.schema
        .createTable('projects')
        .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
        .addColumn('name', 'varchar(200)', (c) => c.notNull())
        .addColumn('owner', 'varchar(200)', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('credits_quota', 'bigint', (c) => c.notNull())
        .addColumn('credits_used', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('quota_period_days', 'integer', (c) => c.notNull())
        .addColumn('period_started_at', 'bigint', (c) => c.notNull())
        .addColumn('usage_epoch', 'bigint', (c) => c.notNull().defaultTo(1))
        .addColumn('rate_limit_rpm', 'integer')
        .addColumn('max_concurrent', 'integer')
        .addColumn('allowed_providers', 'text')
        .addColumn('allowed_models', 'text')
        .addColumn('prompt_rules', 'text')
        .addColumn('metadata', metadataType, (c) => c.notNull().defaultTo('{}'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('disabled_at', 'bigint')
        .execute();
      await db.schema.createIndex('projects_created_idx').on('projects').columns(['created_at', 'id']).execute();
      await db.schema.alterTable('api_keys').addColumn('project_id', 'varchar(64)').execute();
      await db.schema.createIndex('api_keys_project_idx').on('api_keys').columns(['project_id', 'created_at', 'id']).execute();
      await db.schema.alterTable('generations').addColumn('project_id', 'varchar(64)').execute();
      await db.schema.alterTable('generations').addColumn('project_usage_epoch', 'bigint').execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable('generations').dropColumn('project_usage_epoch').execute();
      await db.schema.alterTable('generations').dropColumn('project_id').execute();
      await db.schema.dropIndex('api_keys_project_idx').execute();
      await db.schema.alterTable('api_keys').dropColumn('project_id').execute();
      await db.schema.dropTable('projects').execute();
    },
  };
}
