import SQLite from 'better-sqlite3';
import request from 'supertest';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ADMIN_SECRET, ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/** Creates a jimeng key on the process and starts one generation with it (not awaited). */
async function startGeneration(url: string, prompt: string, headers: Record<string, string> = {}) {
  const created = await createKeyVia(new ApiClient(url), { credits_quota: 10, allowed_providers: ['jimeng'] });
  let generation = request(url).post('/images/generate').set('Authorization', `Bearer ${created.key}`);
  for (const [name, value] of Object.entries(headers)) generation = generation.set(name, value);
  return { keyId: created.id, response: generation.send({ prompt, model: 'jimeng-4.5' }) };
}

describe('a real gateway process: crash safety and graceful shutdown', () => {
  let ark: FakeImagesApi;
  let database: ThrowawayDatabase;
  let env: Record<string, string>;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'k', flavour: 'ark' });
    database = await createThrowawayDatabase('sqlite');
    env = {
      DATABASE_URL: database.url,
      ARK_API_KEY: 'k',
      ARK_BASE_URL: ark.url,
      // Every provider's deadline is 3 s, so anything pending for longer was abandoned.
      PROVIDER_TIMEOUT_MS: '3000',
      SWEEP_GRACE_MS: '0',
      // A dead process's generations are taken over once their lease lapses: short here.
      GENERATION_LEASE_MS: '1000',
      GENERATION_POLL_MS: '100',
      // And a dead request's Idempotency-Key claim.
      IDEMPOTENCY_LEASE_MS: '1000',
    };
  });
  afterAll(async () => {
    await ark.close();
    await database.drop();
  });

  it('SIGKILL mid-request leaks no reservation: the restarted gateway takes it over, never resends the Ark call, releases it and marks it abandoned', async () => {
    const first = await startGatewayProcess(env);
    const { keyId, response } = await startGeneration(first.url, 'never finishes [slow:20000]', { 'Idempotency-Key': 'crash-1' });
    const inFlight = response.then(
      () => 'answered',
      () => 'connection lost',
    );
    const observer = new SQLite(database.url, { readonly: true });
    const pending = () => observer.prepare("SELECT count(*) AS n FROM generations WHERE status IN ('queued', 'running')").get() as { n: number };
    await until(() => pending().n === 1 && ark.requests.some((r) => r.prompt === 'never finishes [slow:20000]'), 'the running generation upstream', 5000);
    expect((observer.prepare('SELECT credits_used FROM api_keys').get() as { credits_used: number }).credits_used).toBe(4);

    await first.stop('SIGKILL');
    expect(await inFlight).toBe('connection lost');
    await new Promise((resolve) => setTimeout(resolve, 3100)); // past the provider deadline

    const second = await startGatewayProcess(env);
    try {
      await until(() => pending().n === 0, 'no pending generation', 5000);
      const row = observer.prepare('SELECT status, error_code FROM generations').get();
      expect(row).toEqual({ status: 'failed', error_code: 'abandoned' });
      const key = await new ApiClient(second.url).admin('get', `/admin/keys/${keyId}`);
      expect(key.body.credits_used).toBe(0);
      // The Ark call may have been accepted upstream: it is never sent a second time.
      expect(ark.requests.filter((r) => r.prompt === 'never finishes [slow:20000]')).toHaveLength(1);
      // The idempotency record of the dead request is gone too, so a retry runs.
      expect((observer.prepare('SELECT count(*) AS n FROM idempotency_keys').get() as { n: number }).n).toBe(0);
    } finally {
      observer.close();
      await second.stop();
    }
  });

  it('SIGTERM finishes in-flight requests, refuses new connections and exits 0', async () => {
    const gateway = await startGatewayProcess(env);
    const { response } = await startGeneration(gateway.url, 'takes a moment [slow:500]');
    const answered = response.then((res) => res);
    await until(() => ark.requests.some((r) => r.prompt === 'takes a moment [slow:500]'), 'the generation upstream', 5000);
    const exit = gateway.stop('SIGTERM');
    const res = await answered;
    expect(res.status).toBe(200);
    expect(res.headers.connection).toBe('close');
    expect(await exit).toBe(0);
    await expect(request(gateway.url).get('/openapi.json').set('Authorization', `Bearer ${ADMIN_SECRET}`)).rejects.toThrow(/ECONNREFUSED/);
  });
});
