import request from 'supertest';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { startFakeImagesApi, type FakeImagesApi } from '../fakes/fake-images-api';
import { Books, BOOKS_CATALOG } from '../helpers/books';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { describeWithServices } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { ThrowawayPostgres, Traffic } from '../helpers/throwaway-servers';

interface Answer {
  prompt: string;
  status: number;
  charged: string | undefined;
  message: string;
  tookMs: number;
}

/**
 * Issue #29 §7, the red team's run: 2 replicas on one PostgreSQL, traffic, PostgreSQL SIGSTOPped
 * for 10 s. Counts the 503s that said "not charged" but whose generation was charged (must be 0)
 * and the slowest answer (within the documented bound), and prints both for the record.
 */
describeWithServices('a hung PostgreSQL under 2 replicas', () => {
  let cluster: ThrowawayPostgres;
  let ark: FakeImagesApi;
  let redis: ReturnType<typeof throwawayRedisPrefix>;
  let observer: GatewayDatabase;
  const replicas: GatewayProcess[] = [];

  beforeAll(async () => {
    cluster = await ThrowawayPostgres.start();
    ark = await startFakeImagesApi({ apiKey: 'ark-hung', flavour: 'ark' });
    redis = throwawayRedisPrefix();
    const env = {
      DATABASE_URL: cluster.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: redis.prefix,
      ARK_API_KEY: 'ark-hung',
      ARK_BASE_URL: ark.url,
      MODEL_CATALOG: JSON.stringify(BOOKS_CATALOG),
    };
    for (let i = 0; i < 2; i += 1) replicas.push(await startGatewayProcess(env));
    observer = openDatabase(cluster.url, { poolSize: 2 });
  }, 120_000);
  afterAll(async () => {
    cluster?.thaw();
    await Promise.all(replicas.map((p) => p.stop('SIGKILL')));
    await observer?.close();
    await ark?.close();
    await redis?.drop();
    await cluster?.destroy();
  });

  it('SIGSTOP 10 s under load: no 503 says "not charged" of a charged generation; every answer within the bound', async () => {
    const created = await createKeyVia(new ApiClient(replicas[0]!.url), {
      credits_quota: 1_000_000,
      rate_limit_rpm: 100_000,
      allowed_providers: ['jimeng', 'local'],
    });
    const books = new Books(observer.db);
    await books.observe();
    let sent = 0;
    // Half instant (local), half with 150 ms upstream: settlements are in flight at every moment.
    const traffic = new Traffic(async (): Promise<Answer> => {
      sent += 1;
      const slow = sent % 2 === 0;
      const prompt = `burst ${sent}${slow ? ' [slow:150]' : ''}`;
      const started = Date.now();
      const url = replicas[sent % 2]!.url;
      const res = await request(url)
        .post('/images/generate')
        .set('Authorization', `Bearer ${created.key}`)
        .send({ prompt, model: slow ? 'held-1' : 'local-1', response_format: 'b64_json' });
      return { prompt, status: res.status, charged: res.body?.error?.charged, message: res.body?.error?.message ?? '', tookMs: Date.now() - started };
    }, 32);
    await traffic.until((answers) => answers.filter((a) => a.status === 200).length >= 100, 'traffic before the stop');
    cluster.freeze();
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    cluster.thaw();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const answers = await traffic.stop();

    // Everything pending settles: late reservations are released (retries), late settlements land.
    const deadline = Date.now() + 60_000;
    let pending = Infinity;
    while (Date.now() < deadline) {
      pending = (await observer.db.selectFrom('generations').select('id').where('status', 'in', ['queued', 'running']).execute()).length;
      if (pending === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const rows = await observer.db.selectFrom('generations').select(['status', 'charged_credits', 'request']).execute();
    const chargedPrompts = new Set(
      rows
        .filter((row) => row.status === 'succeeded' || Number(row.charged_credits ?? 0) > 0)
        .map((row) => (JSON.parse(row.request as string) as { request: { prompt: string } }).request.prompt),
    );
    const unavailable = answers.filter((a) => a.status === 503);
    const saidNotCharged = unavailable.filter((a) => /not charged/.test(a.message));
    const wronglyNotCharged = saidNotCharged.filter((a) => chargedPrompts.has(a.prompt));
    const unknown = unavailable.filter((a) => a.charged === 'unknown');
    const slowest = Math.max(...answers.map((a) => a.tookMs));
    const numbers = {
      requests: answers.length,
      answered_503: unavailable.length,
      said_not_charged: saidNotCharged.length,
      said_not_charged_but_charged: wronglyNotCharged.length,
      said_unknown: unknown.length,
      said_unknown_and_charged: unknown.filter((a) => chargedPrompts.has(a.prompt)).length,
      other_statuses: answers.filter((a) => a.status !== 200 && a.status !== 503).map((a) => a.status),
      slowest_answer_ms: slowest,
      pending_after_60s: pending,
    };
    console.log(`hung PostgreSQL, 2 replicas, SIGSTOP 10 s: ${JSON.stringify(numbers)}`);

    expect(wronglyNotCharged).toEqual([]);
    expect(numbers.other_statuses).toEqual([]);
    expect(slowest).toBeLessThan(8000);
    expect(pending).toBe(0);
    expect(await books.violations({ keyId: created.id, settled: true })).toEqual([]);
  }, 180_000);
});
