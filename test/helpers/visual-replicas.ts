import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { type GatewayProcess, startGatewayProcess } from './gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from './test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from './test-redis';

/** Gateway processes sharing one throwaway PostgreSQL database and Redis prefix, with the fake visual API as their jimeng account. */
export interface VisualReplicas {
  visual: FakeVisual;
  database: ThrowawayDatabase;
  /** A connection of the test's own, to look at the rows the replicas write. */
  observer: GatewayDatabase;
  replicas: GatewayProcess[];
  close(): Promise<void>;
}

export async function startVisualReplicas(count: number, env: Record<string, string> = {}): Promise<VisualReplicas> {
  const credentials = { accessKeyId: 'AKLTreplicas', secretAccessKey: 'replicas-secret' };
  const visual = await startFakeVisual(credentials);
  const database = await createThrowawayDatabase('postgres');
  const redis = throwawayRedisPrefix();
  const replicas: GatewayProcess[] = [];
  const processEnv = {
    DATABASE_URL: database.url,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: redis.prefix,
    VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
    VOLC_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    VOLC_VISUAL_ENDPOINT: visual.url,
    VOLC_POLL_INTERVAL_MS: '20',
    ...env,
  };
  // One after the other: several cold starts at once can miss the start deadline on a loaded machine.
  for (let i = 0; i < count; i += 1) replicas.push(await startGatewayProcess(processEnv));
  const observer = openDatabase(database.url, { poolSize: 2 });
  return {
    visual,
    database,
    observer,
    replicas,
    async close() {
      await Promise.all(replicas.map((p) => p.stop('SIGKILL')));
      await observer.close();
      await visual.close();
      await database.drop();
      await redis.drop();
    },
  };
}
