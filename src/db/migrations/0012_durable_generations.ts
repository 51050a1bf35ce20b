import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // Generations become durable work (issue #17): status queued|running|succeeded|failed|canceled,
  // the normalized request to run it later, a lease (owner, expiry) that a live worker renews, a
  // cancel flag the lease holder reads at renewal, and a journal of upstream calls per image
  // (generation_tasks) so a takeover resumes an accepted visual task instead of resubmitting.
  // Rows pending at upgrade carry no request, so no worker can run them: they become running with no
  // lease, and the sweeper abandons them (credits released) once the provider deadline has passed.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('generations').addColumn('request', 'text').execute();
    await db.schema.alterTable('generations').addColumn('lease_owner', 'varchar(100)').execute();
    await db.schema.alterTable('generations').addColumn('lease_expires_at', 'bigint').execute();
    await db.schema.alterTable('generations').addColumn('started_at', 'bigint').execute();
    await db.schema
      .alterTable('generations')
      .addColumn('cancel_requested', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('generations').addColumn('error_message', 'varchar(1000)').execute();
    // Claims so far: above 1, the current run is a takeover of work a dead process started.
    await db.schema
      .alterTable('generations')
      .addColumn('runs', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await sql`UPDATE generations SET status = 'running' WHERE status = 'pending'`.execute(db);
    await db.schema.dropIndex('generations_pending_idx').execute();
    await db.schema
      .createIndex('generations_active_idx')
      .on('generations')
      .columns(['status', 'created_at'])
      .where(sql.ref('status'), 'in', sql`('queued', 'running')`)
      .execute();
    await db.schema
      .createTable('generation_tasks')
      .addColumn('generation_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('image_index', 'integer', (c) => c.notNull())
      .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('task_id', 'varchar(200)')
      .addColumn('sent_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('generation_tasks_pk', ['generation_id', 'image_index'])
      .execute();
  },
  async down() {
    throw new Error('0012 cannot be undone');
  },
};
