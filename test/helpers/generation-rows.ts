import { openDatabase, type GatewayDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import type { GenerationsTable } from '../../src/db/schema';
import { createThrowawayDatabase } from './test-database';

/** A generation row for repository tests: an internal one, queued, no lease; `overrides` set the rest. */
export function generationRow(id: string, overrides: Partial<GenerationsTable> = {}): GenerationsTable {
  return {
    id,
    key_id: null,
    client_id: 'test',
    model: 'local-1',
    provider: 'local',
    images: 1,
    credits: 1,
    status: 'queued',
    error_code: null,
    latency_ms: null,
    period_started_at: 0,
    created_at: 0,
    completed_at: null,
    usage_epoch: null,
    request: null,
    lease_owner: null,
    lease_expires_at: null,
    started_at: null,
    cancel_requested: 0,
    error_message: null,
    runs: 0,
    ...overrides,
  };
}

/** A throwaway database of the suite's engine with the schema migrated; `drop` closes and removes it. */
export async function migratedDatabase(): Promise<{ database: GatewayDatabase; drop(): Promise<void> }> {
  const throwaway = await createThrowawayDatabase(undefined, { migrated: true });
  const database = openDatabase(throwaway.url);
  await migrateToLatest(database.db as never, database.engine);
  return {
    database,
    drop: async () => {
      await database.close();
      await throwaway.drop();
    },
  };
}
