import { type Kysely, type Migration, sql } from 'kysely';
import type { DatabaseEngine } from '../database';

export function migration(engine: DatabaseEngine): Migration {
  return {
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
  };
}
