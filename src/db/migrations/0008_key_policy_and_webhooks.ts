import { type Kysely, type Migration, sql } from 'kysely';
import type { DatabaseEngine } from '../database';

export function migration(engine: DatabaseEngine): Migration {
  return {
    // Key policy (issue #16 section 1): concurrency cap, IP and model allowlists, metadata, alert
    // thresholds; concurrency leases for replicas without Redis.
    async up(db: Kysely<unknown>) {
      // jsonb on PostgreSQL, text on SQLite: `metadata ->> 'name'` filters on both.
      const metadataType = engine === 'postgres' ? sql`jsonb` : sql`text`;
      await db.schema.alterTable('api_keys').addColumn('max_concurrent', 'integer').execute();
      await db.schema.alterTable('api_keys').addColumn('allowed_ips', 'text').execute();
      await db.schema.alterTable('api_keys').addColumn('allowed_models', 'text').execute();
      await db.schema
        .alterTable('api_keys')
        .addColumn('metadata', metadataType, (c) => c.notNull().defaultTo('{}'))
        .execute();
      await db.schema
        .alterTable('api_keys')
        .addColumn('alert_thresholds', 'text', (c) => c.notNull().defaultTo('[80,100]'))
        .execute();
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
  };
}
