// First: refuses an unsupported Node.js before anything native loads (see the module).
import './require-supported-node';
import { databaseUrlFromEnv, maskUrl } from './config/config';
import { engineOf, openDatabase } from './db/database';
// '/index', not the folder: a dist/ built before the split keeps db/migrations.js, which Node would load first.
import { migrateToLatest } from './db/migrations/index';
import { describeStartupFailure } from './startup-failure';

/**
 * `npm run migrate`: brings DATABASE_URL's schema to the latest version and exits, so a rollout can
 * migrate once before any new replica starts. Needs only DATABASE_URL (no secrets); kysely's migration
 * lock makes it safe beside running replicas.
 */
async function migrate(): Promise<void> {
  const url = databaseUrlFromEnv();
  const database = openDatabase(url, { poolSize: 1 });
  try {
    await migrateToLatest(database.db as never, engineOf(url));
  } finally {
    await database.close();
  }
  console.log(`creative-gateway: ${maskUrl(url)} is migrated to the latest schema`);
}

migrate().catch((error: unknown) => {
  const failure = describeStartupFailure(error);
  console.error(failure?.line ?? `creative-gateway: migration failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(failure?.exitCode ?? 1);
});
