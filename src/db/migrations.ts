import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import type { DatabaseEngine } from './database';

/**
 * Migrations live in code (not files) so the compiled and the test build run the same ones.
 * Types are chosen to mean the same on SQLite and PostgreSQL.
 */
function migrations(engine: DatabaseEngine): Record<string, Migration> {
  return {
    '0001_keys_and_generations': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('key_hash', 'varchar(64)', (c) => c.notNull().unique())
          .addColumn('hint', 'varchar(64)', (c) => c.notNull())
          .addColumn('name', 'varchar(200)', (c) => c.notNull())
          .addColumn('owner', 'varchar(200)', (c) => c.notNull())
          .addColumn('status', 'varchar(16)', (c) => c.notNull())
          .addColumn('credits_quota', 'bigint', (c) => c.notNull())
          .addColumn('credits_used', 'bigint', (c) => c.notNull())
          .addColumn('quota_period_days', 'integer', (c) => c.notNull())
          .addColumn('period_started_at', 'bigint', (c) => c.notNull())
          .addColumn('rate_limit_rpm', 'integer', (c) => c.notNull())
          .addColumn('allowed_providers', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'bigint')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addColumn('disabled_at', 'bigint')
          .addColumn('last_used_at', 'bigint')
          .execute();
        await db.schema.createIndex('api_keys_created_idx').on('api_keys').columns(['created_at', 'id']).execute();
        await db.schema.createIndex('api_keys_owner_idx').on('api_keys').columns(['owner', 'created_at']).execute();

        await db.schema
          .createTable('generations')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('model', 'varchar(100)', (c) => c.notNull())
          .addColumn('provider', 'varchar(32)', (c) => c.notNull())
          .addColumn('images', 'integer', (c) => c.notNull())
          .addColumn('credits', 'bigint', (c) => c.notNull())
          .addColumn('status', 'varchar(16)', (c) => c.notNull())
          .addColumn('error_code', 'varchar(64)')
          .addColumn('latency_ms', 'integer')
          .addColumn('period_started_at', 'bigint', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('completed_at', 'bigint')
          .execute();
        await db.schema.createIndex('generations_key_idx').on('generations').columns(['key_id', 'created_at']).execute();
        await db.schema.createIndex('generations_status_idx').on('generations').columns(['status', 'created_at']).execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('generations').execute();
        await db.schema.dropTable('api_keys').execute();
      },
    },
    '0002_rate_limit_hits': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('rate_limit_hits')
          .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('rate_limit_hits_key_at_idx').on('rate_limit_hits').columns(['key_id', 'at']).execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('rate_limit_hits').execute();
      },
    },
    '0003_idempotency_keys': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('idempotency_keys')
          .addColumn('scope', 'varchar(80)', (c) => c.notNull())
          .addColumn('idempotency_key', 'varchar(255)', (c) => c.notNull())
          .addColumn('request_hash', 'varchar(64)', (c) => c.notNull())
          .addColumn('state', 'varchar(16)', (c) => c.notNull())
          .addColumn('response_status', 'integer')
          .addColumn('response_body', 'text')
          .addColumn('response_location', 'varchar(300)')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'idempotency_key'])
          .execute();
        await db.schema.createIndex('idempotency_keys_created_idx').on('idempotency_keys').column('created_at').execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('idempotency_keys').execute();
      },
    },
    '0004_internal_generations': {
      // Internal (service-token) generations have no key: key_id becomes nullable, client_id says who.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('generations').addColumn('client_id', 'varchar(200)').execute();
        if (engine === 'postgres') {
          await sql`ALTER TABLE generations ALTER COLUMN key_id DROP NOT NULL`.execute(db);
        } else {
          // SQLite cannot drop NOT NULL in place: rebuild the table with the same rows.
          await sql`CREATE TABLE generations_new (
            id varchar(64) PRIMARY KEY, key_id varchar(64), model varchar(100) NOT NULL, provider varchar(32) NOT NULL,
            images integer NOT NULL, credits bigint NOT NULL, status varchar(16) NOT NULL, error_code varchar(64),
            latency_ms integer, period_started_at bigint NOT NULL, created_at bigint NOT NULL, completed_at bigint,
            client_id varchar(200))`.execute(db);
          await sql`INSERT INTO generations_new SELECT id, key_id, model, provider, images, credits, status, error_code,
            latency_ms, period_started_at, created_at, completed_at, client_id FROM generations`.execute(db);
          await sql`DROP TABLE generations`.execute(db);
          await sql`ALTER TABLE generations_new RENAME TO generations`.execute(db);
          await db.schema.createIndex('generations_key_idx').on('generations').columns(['key_id', 'created_at']).execute();
          await db.schema.createIndex('generations_status_idx').on('generations').columns(['status', 'created_at']).execute();
        }
        await db.schema.createIndex('generations_created_idx').on('generations').columns(['created_at', 'id']).execute();
      },
      async down() {
        throw new Error('0004 cannot be undone');
      },
    },
    '0005_pending_generations_index': {
      // The sweeper only looks for pending rows: index just those, so settling a generation removes
      // one small entry instead of moving it within an index of every status.
      async up(db: Kysely<unknown>) {
        await db.schema.dropIndex('generations_status_idx').execute();
        await db.schema
          .createIndex('generations_pending_idx')
          .on('generations')
          .columns(['provider', 'created_at'])
          .where(sql.ref('status'), '=', 'pending')
          .execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropIndex('generations_pending_idx').execute();
        await db.schema.createIndex('generations_status_idx').on('generations').columns(['status', 'created_at']).execute();
      },
    },
    '0006_usage_epochs': {
      // A key's usage counter is a book numbered by usage_epoch: reset_usage and every roll-over to a
      // new period open the next one. A generation records the book it was charged to, and its
      // release only touches that book. Keys start at book 1; a generation already pending at
      // upgrade keeps book 1 if it was reserved in the key's stored period (the old rule compared
      // period starts), else book 0, which no key has, so its release changes nothing.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('api_keys').addColumn('usage_epoch', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
        await db.schema.alterTable('generations').addColumn('usage_epoch', 'bigint').execute();
        await sql`UPDATE api_keys SET usage_epoch = 1`.execute(db);
        await sql`UPDATE generations SET usage_epoch = CASE WHEN period_started_at =
          (SELECT k.period_started_at FROM api_keys k WHERE k.id = generations.key_id) THEN 1 ELSE 0 END
          WHERE key_id IS NOT NULL`.execute(db);
      },
      async down(db: Kysely<unknown>) {
        await db.schema.alterTable('generations').dropColumn('usage_epoch').execute();
        await db.schema.alterTable('api_keys').dropColumn('usage_epoch').execute();
      },
    },
    '0007_channels': {
      // Upstream accounts (channels), the attempts of each generation, and the SQL store of channel
      // limits (leases for concurrency, one row per call for rpm/ipm) used when there is no Redis.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('channels')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('name', 'varchar(200)', (c) => c.notNull())
          .addColumn('provider', 'varchar(32)', (c) => c.notNull())
          .addColumn('transport', 'varchar(16)', (c) => c.notNull())
          .addColumn('base_url', 'varchar(500)', (c) => c.notNull())
          .addColumn('models', 'text', (c) => c.notNull())
          .addColumn('priority', 'integer', (c) => c.notNull())
          .addColumn('weight', 'integer', (c) => c.notNull())
          .addColumn('status', 'varchar(16)', (c) => c.notNull())
          .addColumn('disabled_reason', 'varchar(500)')
          .addColumn('disabled_at', 'bigint')
          .addColumn('max_concurrency', 'integer')
          .addColumn('rpm', 'integer')
          .addColumn('ipm', 'integer')
          .addColumn('timeout_ms', 'integer', (c) => c.notNull())
          .addColumn('credentials_sealed', 'text', (c) => c.notNull())
          .addColumn('credentials_hint', 'varchar(64)', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('generation_attempts')
          .addColumn('generation_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('seq', 'integer', (c) => c.notNull())
          .addColumn('image_index', 'integer', (c) => c.notNull())
          .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('outcome', 'varchar(16)', (c) => c.notNull())
          .addColumn('error_code', 'varchar(64)')
          .addColumn('latency_ms', 'integer', (c) => c.notNull())
          .addColumn('started_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('generation_attempts_pk', ['generation_id', 'seq'])
          .execute();
        await db.schema
          .createTable('channel_leases')
          .addColumn('lease_id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('channel_leases_channel_idx').on('channel_leases').columns(['channel_id', 'expires_at']).execute();
        await db.schema
          .createTable('channel_calls')
          .addColumn('channel_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('at', 'bigint', (c) => c.notNull())
          .addColumn('images', 'integer', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('channel_calls_channel_at_idx').on('channel_calls').columns(['channel_id', 'at']).execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('channel_calls').execute();
        await db.schema.dropTable('channel_leases').execute();
        await db.schema.dropTable('generation_attempts').execute();
        await db.schema.dropTable('channels').execute();
      },
    },
    '0008_key_policy_and_webhooks': {
      // Key policy (issue #16 section 1): concurrency cap, IP and model allowlists, metadata, alert
      // thresholds; concurrency leases for replicas without Redis.
      async up(db: Kysely<unknown>) {
        // jsonb on PostgreSQL, text on SQLite: `metadata ->> 'name'` filters on both.
        const metadataType = engine === 'postgres' ? sql`jsonb` : sql`text`;
        await db.schema.alterTable('api_keys').addColumn('max_concurrent', 'integer').execute();
        await db.schema.alterTable('api_keys').addColumn('allowed_ips', 'text').execute();
        await db.schema.alterTable('api_keys').addColumn('allowed_models', 'text').execute();
        await db.schema.alterTable('api_keys').addColumn('metadata', metadataType, (c) => c.notNull().defaultTo('{}')).execute();
        await db.schema.alterTable('api_keys').addColumn('alert_thresholds', 'text', (c) => c.notNull().defaultTo('[80,100]')).execute();
        await db.schema
          .createTable('key_leases')
          .addColumn('lease_id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('key_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('key_leases_key_idx').on('key_leases').columns(['key_id', 'expires_at']).execute();

        // Events and webhooks (section 2): an outbox of events written in the state change's
        // transaction, one delivery per (event, endpoint), every attempt kept.
        await db.schema
          .createTable('webhook_endpoints')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('url', 'varchar(2000)', (c) => c.notNull())
          .addColumn('description', 'varchar(500)', (c) => c.notNull())
          .addColumn('event_types', 'text', (c) => c.notNull())
          .addColumn('status', 'varchar(16)', (c) => c.notNull())
          .addColumn('disabled_reason', 'varchar(500)')
          .addColumn('disabled_at', 'bigint')
          .addColumn('failing_since', 'bigint')
          .addColumn('secret', 'varchar(200)', (c) => c.notNull())
          .addColumn('previous_secret', 'varchar(200)')
          .addColumn('previous_secret_expires_at', 'bigint')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('events')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('type', 'varchar(100)', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('dedupe_key', 'varchar(300)', (c) => c.unique())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('webhook_deliveries')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('event_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('endpoint_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('status', 'varchar(16)', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull())
          .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
          .addColumn('lease_expires_at', 'bigint')
          .addColumn('last_status_code', 'integer')
          .addColumn('last_error', 'varchar(500)')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('completed_at', 'bigint')
          .addUniqueConstraint('webhook_deliveries_event_endpoint_uq', ['event_id', 'endpoint_id'])
          .execute();
        await db.schema.createIndex('webhook_deliveries_due_idx').on('webhook_deliveries').columns(['status', 'next_attempt_at']).execute();
        await db.schema.createIndex('webhook_deliveries_endpoint_idx').on('webhook_deliveries').columns(['endpoint_id', 'created_at']).execute();
        await db.schema
          .createTable('webhook_attempts')
          .addColumn('delivery_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('attempt', 'integer', (c) => c.notNull())
          .addColumn('attempted_at', 'bigint', (c) => c.notNull())
          .addColumn('status_code', 'integer')
          .addColumn('error', 'varchar(500)')
          .addColumn('duration_ms', 'integer', (c) => c.notNull())
          .addPrimaryKeyConstraint('webhook_attempts_pk', ['delivery_id', 'attempt'])
          .execute();
      },
      async down() {
        throw new Error('0008 cannot be undone');
      },
    },
    '0010_admin_tokens_and_audit_events': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('admin_tokens')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('token_hash', 'varchar(64)', (c) => c.notNull().unique())
          .addColumn('hint', 'varchar(64)', (c) => c.notNull())
          .addColumn('name', 'varchar(200)', (c) => c.notNull())
          .addColumn('scopes', 'text', (c) => c.notNull())
          .addColumn('created_by', 'varchar(200)', (c) => c.notNull())
          .addColumn('expires_at', 'bigint')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('revoked_at', 'bigint')
          .execute();
        await db.schema.createIndex('admin_tokens_created_idx').on('admin_tokens').columns(['created_at', 'id']).execute();

        await db.schema
          .createTable('audit_events')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('actor', 'varchar(200)', (c) => c.notNull())
          .addColumn('action', 'varchar(81)', (c) => c.notNull())
          .addColumn('target', 'varchar(200)', (c) => c.notNull())
          .addColumn('before', 'text')
          .addColumn('after', 'text')
          .addColumn('request_id', 'varchar(200)', (c) => c.notNull())
          .addColumn('client_ip', 'varchar(64)', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('audit_events_created_idx').on('audit_events').columns(['created_at', 'id']).execute();
        for (const column of ['actor', 'target', 'action'] as const) {
          await db.schema.createIndex(`audit_events_${column}_idx`).on('audit_events').columns([column, 'created_at', 'id']).execute();
        }
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('audit_events').execute();
        await db.schema.dropTable('admin_tokens').execute();
      },
    },
    '0011_stored_images': {
      // One row per image the gateway stored (its bytes are in the image store under its id). After
      // the sweeper deletes the bytes the row stays a day as a tombstone, so even a replica whose
      // clock lags answers 410 for its URLs, not 404.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('stored_images')
          .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('generation_id', 'varchar(64)', (c) => c.notNull())
          .addColumn('position', 'integer', (c) => c.notNull())
          .addColumn('content_type', 'varchar(32)', (c) => c.notNull())
          .addColumn('byte_size', 'bigint', (c) => c.notNull())
          .addColumn('sha256', 'varchar(64)', (c) => c.notNull())
          .addColumn('width', 'integer', (c) => c.notNull())
          .addColumn('height', 'integer', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addColumn('deleted_at', 'bigint')
          .execute();
        await db.schema.createIndex('stored_images_generation_idx').on('stored_images').columns(['generation_id', 'position']).execute();
        await db.schema
          .createIndex('stored_images_live_expiry_idx')
          .on('stored_images')
          .column('expires_at')
          .where(sql.ref('deleted_at'), 'is', null)
          .execute();
        await db.schema.createIndex('stored_images_deleted_idx').on('stored_images').column('deleted_at').execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('stored_images').execute();
      },
    },
    '0012_durable_generations': {
      // Generations become durable work (issue #17): status queued|running|succeeded|failed|canceled,
      // the normalized request to run it later, a lease (owner, expiry) that a live worker renews, a
      // cancel flag the lease holder reads at renewal, and a journal of upstream calls per image
      // (generation_tasks) so a takeover resumes an accepted visual task instead of resubmitting.
      // Rows pending at upgrade carry no request: they become running with no lease, and the sweeper
      // abandons them after the provider deadline as before.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('generations').addColumn('request', 'text').execute();
        await db.schema.alterTable('generations').addColumn('lease_owner', 'varchar(100)').execute();
        await db.schema.alterTable('generations').addColumn('lease_expires_at', 'bigint').execute();
        await db.schema.alterTable('generations').addColumn('started_at', 'bigint').execute();
        await db.schema.alterTable('generations').addColumn('cancel_requested', 'integer', (c) => c.notNull().defaultTo(0)).execute();
        await db.schema.alterTable('generations').addColumn('error_message', 'varchar(1000)').execute();
        // Claims so far: above 1, the current run is a takeover of work a dead process started.
        await db.schema.alterTable('generations').addColumn('runs', 'integer', (c) => c.notNull().defaultTo(0)).execute();
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
    },
    '0013_audit_events_append_only': {
      // The audit log must not depend on the application alone to stay untouched: the database
      // itself refuses to change or delete an event (whoever connects, unless they drop the
      // trigger, which needs the table owner). The gateway never prunes events; a retention policy
      // would be a documented DBA step (see README, Audit log).
      async up(db: Kysely<unknown>) {
        if (engine === 'postgres') {
          await sql`
            CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
            END
            $$`.execute(db);
          await sql`CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()`.execute(db);
          // TRUNCATE fires no row trigger: refused by its own.
          await sql`CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()`.execute(db);
        } else {
          for (const operation of ['UPDATE', 'DELETE']) {
            await sql
              .raw(
                `CREATE TRIGGER audit_events_no_${operation.toLowerCase()} BEFORE ${operation} ON audit_events ` +
                  `BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: ${operation} refused'); END`,
              )
              .execute(db);
          }
        }
      },
      async down(db: Kysely<unknown>) {
        if (engine === 'postgres') {
          await sql`DROP TRIGGER audit_events_no_truncate ON audit_events`.execute(db);
          await sql`DROP TRIGGER audit_events_append_only ON audit_events`.execute(db);
          await sql`DROP FUNCTION audit_events_append_only()`.execute(db);
        } else {
          await sql`DROP TRIGGER audit_events_no_update`.execute(db);
          await sql`DROP TRIGGER audit_events_no_delete`.execute(db);
        }
      },
    },
    '0014_channel_cooldowns_and_shared_leases': {
      // Busy cool-downs of channels seen by every replica, and named leases (the periodic channel
      // probe runs on one replica at a time), for replicas without Redis.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('channels').addColumn('cooldown_until', 'bigint').execute();
        await db.schema
          .createTable('shared_leases')
          .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('holder', 'varchar(64)', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropTable('shared_leases').execute();
        await db.schema.alterTable('channels').dropColumn('cooldown_until').execute();
      },
    },
    '0015_completion_webhooks': {
      // Completion webhooks (issue #17): a per-key signing secret (sealed, like endpoint secrets),
      // and deliveries of the outbox that go to a request's own URL instead of an endpoint:
      // target_url set, signed with signing_key_id's secret (endpoint_id then names that key).
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('key_webhook_secrets')
          .addColumn('key_id', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('secret', 'varchar(300)', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.alterTable('webhook_deliveries').addColumn('target_url', 'varchar(2000)').execute();
        await db.schema.alterTable('webhook_deliveries').addColumn('signing_key_id', 'varchar(64)').execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.alterTable('webhook_deliveries').dropColumn('signing_key_id').execute();
        await db.schema.alterTable('webhook_deliveries').dropColumn('target_url').execute();
        await db.schema.dropTable('key_webhook_secrets').execute();
      },
    },
    '0016_generation_charges': {
      // What a generation that delivered nothing still cost (issue #29): credits kept by a cancel or
      // disconnect after its upstream calls were sent, and images made upstream that no key paid
      // for (the operator's loss), with the reason.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('generations').addColumn('charged_credits', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
        await db.schema.alterTable('generations').addColumn('unbilled_images', 'integer', (c) => c.notNull().defaultTo(0)).execute();
        await db.schema.alterTable('generations').addColumn('unbilled_reason', 'varchar(64)').execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.alterTable('generations').dropColumn('unbilled_reason').execute();
        await db.schema.alterTable('generations').dropColumn('unbilled_images').execute();
        await db.schema.alterTable('generations').dropColumn('charged_credits').execute();
      },
    },
    '0017_admin_token_lineage_and_scopes': {
      // Issue #29 §6: a token's children are found by created_by (revocation cascades to them), and
      // tokens issued before children were bound to their parent are brought in line: a child
      // expires no later than its parent and is revoked when its parent is. Issue #29 §8: the
      // `usage:read` scope opened no operation and is gone from the spec; stored tokens drop it.
      async up(db: Kysely<unknown>) {
        await db.schema.createIndex('admin_tokens_created_by_idx').on('admin_tokens').columns(['created_by']).execute();
        const { rows } = await sql<{ id: string; created_by: string; scopes: string; expires_at: string | number | null; revoked_at: string | number | null }>`
          SELECT id, created_by, scopes, expires_at, revoked_at FROM admin_tokens ORDER BY created_at, id`.execute(db);
        const effective = new Map<string, { expiresAt: number | null; revokedAt: number | null }>();
        const orNull = (value: string | number | null) => (value === null ? null : Number(value));
        // Parents are created before their children, so one pass in creation order sees each parent first.
        for (const row of rows) {
          const own = { expiresAt: orNull(row.expires_at), revokedAt: orNull(row.revoked_at) };
          const parent = effective.get(row.created_by);
          const bound = parent
            ? {
                expiresAt: parent.expiresAt === null ? own.expiresAt : Math.min(own.expiresAt ?? parent.expiresAt, parent.expiresAt),
                revokedAt: own.revokedAt ?? parent.revokedAt,
              }
            : own;
          effective.set(row.id, bound);
          const scopes = (JSON.parse(row.scopes) as string[]).filter((scope) => scope !== 'usage:read');
          if (bound.expiresAt !== own.expiresAt || bound.revokedAt !== own.revokedAt || scopes.length !== JSON.parse(row.scopes).length) {
            await sql`UPDATE admin_tokens SET expires_at = ${bound.expiresAt}, revoked_at = ${bound.revokedAt}, scopes = ${JSON.stringify(scopes)}
              WHERE id = ${row.id}`.execute(db);
          }
        }
      },
      async down(db: Kysely<unknown>) {
        await db.schema.dropIndex('admin_tokens_created_by_idx').execute();
      },
    },
  };
}

/** Applies every migration not applied yet; `upTo` stops after the named one (tests of an upgrade). */
export async function migrateToLatest(db: Kysely<unknown>, engine: DatabaseEngine, upTo?: string): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations(engine) };
  const migrator = new Migrator({ db, provider });
  const { error, results } = upTo === undefined ? await migrator.migrateToLatest() : await migrator.migrateTo(upTo);
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`Database migration ${failed?.migrationName ?? ''} failed: ${(error as Error | undefined)?.message ?? 'unknown error'}`);
  }
}
