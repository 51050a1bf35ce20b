import { openDatabase, type GatewayDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import type { ApiKeysTable, GenerationsTable } from '../../src/db/schema';
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

const DAY_MS = 86_400_000;

/** An api_keys row for repository tests: active, 100 credits with 10 used, its period started a day before `now`; `overrides` set the rest. */
export function keyRow(id: string, now: number, overrides: Partial<ApiKeysTable> = {}): ApiKeysTable {
  return {
    id,
    key_hash: `hash_${id}`,
    hint: 'hyai_...abcd',
    name: id,
    owner: 'tests',
    status: 'active',
    credits_quota: 100,
    credits_used: 10,
    quota_period_days: 30,
    period_started_at: now - DAY_MS,
    usage_epoch: 0,
    rate_limit_rpm: 30,
    allowed_providers: '["local"]',
    expires_at: null,
    created_at: now - DAY_MS,
    updated_at: now - DAY_MS,
    disabled_at: null,
    last_used_at: null,
    max_concurrent: null,
    allowed_ips: null,
    allowed_models: null,
    metadata: '{}',
    alert_thresholds: '[50, 80]',
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
