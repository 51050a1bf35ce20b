import { type Kysely, type Migration, type MigrationProvider, Migrator } from 'kysely';
import type { DatabaseEngine } from '../database';
import { migration as m0001 } from './0001_keys_and_generations';
import { migration as m0002 } from './0002_rate_limit_hits';
import { migration as m0003 } from './0003_idempotency_keys';
import { migration as m0004 } from './0004_internal_generations';
import { migration as m0005 } from './0005_pending_generations_index';
import { migration as m0006 } from './0006_usage_epochs';
import { migration as m0007 } from './0007_channels';
import { migration as m0008 } from './0008_key_policy_and_webhooks';
import { migration as m0010 } from './0010_admin_tokens_and_audit_events';
import { migration as m0011 } from './0011_stored_images';
import { migration as m0012 } from './0012_durable_generations';
import { migration as m0013 } from './0013_audit_events_append_only';
import { migration as m0014 } from './0014_channel_cooldowns_and_shared_leases';
import { migration as m0015 } from './0015_completion_webhooks';
import { migration as m0016 } from './0016_generation_charges';
import { migration as m0017 } from './0017_admin_token_lineage_and_scopes';
import { migration as m0018 } from './0018_leases';
import { migration as m0019 } from './0019_stored_image_roles';
import { migration as m0020 } from './0020_usage_rollups';
import { migration as m0021 } from './0021_usage_key_months_and_day_totals';
import { migration as m0022 } from './0022_stored_image_owners';
import { migration as m0023 } from './0023_model_fallbacks';
import { migration as m0024 } from './0024_attempt_upstream_usage';
import { migration as m0025 } from './0025_prompt_retention';
import { migration as m0026 } from './0026_key_prompt_rules';
import { migration as m0027 } from './0027_projects';
import { migration as m0028 } from './0028_usage_blocked';
import { migration as m0029 } from './0029_moderation_hooks';
import { migration as m0030 } from './0030_project_prompt_retention';
import { migration as m0031 } from './0031_moderation_hook_secret_rotation';
import { migration as m0032 } from './0032_idempotency_key_leases';
import { migration as m0033 } from './0033_console_sessions';
import { migration as m0034 } from './0034_upstream_cost';

/** A migration file exports a Migration, or a function of the engine when it depends on it. */
export type MigrationSource = Migration | ((engine: DatabaseEngine) => Migration);

/**
 * Every migration, in order, under the name of its file (NNNN_name.ts in this folder). They are
 * imported statically (not read from the folder) so the compiled and the test build run the same ones.
 * Types are chosen to mean the same on SQLite and PostgreSQL.
 */
export const migrationSources: ReadonlyArray<readonly [name: string, source: MigrationSource]> = [
  ['0001_keys_and_generations', m0001],
  ['0002_rate_limit_hits', m0002],
  ['0003_idempotency_keys', m0003],
  ['0004_internal_generations', m0004],
  ['0005_pending_generations_index', m0005],
  ['0006_usage_epochs', m0006],
  ['0007_channels', m0007],
  ['0008_key_policy_and_webhooks', m0008],
  // No 0009: no commit ever had one (`git log --all -S0009`); 0007, 0008, 0010, 0011 were numbered on parallel branches and none took 0009.
  ['0010_admin_tokens_and_audit_events', m0010],
  ['0011_stored_images', m0011],
  ['0012_durable_generations', m0012],
  ['0013_audit_events_append_only', m0013],
  ['0014_channel_cooldowns_and_shared_leases', m0014],
  ['0015_completion_webhooks', m0015],
  ['0016_generation_charges', m0016],
  ['0017_admin_token_lineage_and_scopes', m0017],
  ['0018_leases', m0018],
  ['0019_stored_image_roles', m0019],
  ['0020_usage_rollups', m0020],
  ['0021_usage_key_months_and_day_totals', m0021],
  ['0022_stored_image_owners', m0022],
  ['0023_model_fallbacks', m0023],
  ['0024_attempt_upstream_usage', m0024],
  ['0025_prompt_retention', m0025],
  ['0026_key_prompt_rules', m0026],
  ['0027_projects', m0027],
  ['0028_usage_blocked', m0028],
  ['0029_moderation_hooks', m0029],
  ['0030_project_prompt_retention', m0030],
  ['0031_moderation_hook_secret_rotation', m0031],
  ['0032_idempotency_key_leases', m0032],
  ['0033_console_sessions', m0033],
  ['0034_upstream_cost', m0034],
];

/** The migrations for an engine, keyed by name in order. */
export function migrations(engine: DatabaseEngine): Record<string, Migration> {
  const record: Record<string, Migration> = {};
  for (const [name, source] of migrationSources) {
    record[name] = typeof source === 'function' ? source(engine) : source;
  }
  return record;
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
