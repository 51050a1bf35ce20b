import SQLite from 'better-sqlite3';
import request from 'supertest';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const credentials = { accessKeyId: 'AKLTdurable', secretAccessKey: 'durable-secret' };

/**
 * Issue #17 "resume, never repeat", on a real SQLite gateway process: SIGKILLed while the visual
 * API holds its task, then restarted. The restarted process takes the generation over once its
 * lease lapsed and polls the stored task: the fake sees one submission, the books charge exactly
 * the images delivered.
 */
describe('durable generations: SIGKILL mid-generation, restart, takeover (SQLite)', () => {
  let visual: FakeVisual;
  let database: ThrowawayDatabase;
  let env: Record<string, string>;
  const started: GatewayProcess[] = [];

  beforeAll(async () => {
    visual = await startFakeVisual(credentials);
    database = await createThrowawayDatabase('sqlite');
    env = {
      DATABASE_URL: database.url,
      VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
      VOLC_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      VOLC_VISUAL_ENDPOINT: visual.url,
      VOLC_POLL_INTERVAL_MS: '20',
      GENERATION_LEASE_MS: '1000',
      GENERATION_POLL_MS: '100',
    };
  });
  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop('SIGKILL')));
    await visual.close();
    await database.drop();
  });

  it('the restarted gateway polls the stored task instead of submitting again; credits charged = images delivered', async () => {
    const first = await startGatewayProcess(env);
    started.push(first);
    const created = await createKeyVia(new ApiClient(first.url), { credits_quota: 100, allowed_providers: ['jimeng'] });
    // ~100 polls of 20 ms: the task is still generating when the process dies.
    const prompt = 'a lighthouse [pending:100]';
    const inFlight = request(first.url)
      .post('/images/generate')
      .set('Authorization', `Bearer ${created.key}`)
      .send({ prompt, model: 'jimeng-4.0', n: 2 })
      .then(
        () => 'answered',
        () => 'connection lost',
      );
    const observer = new SQLite(database.url, { readonly: true });
    try {
      const tasks = () => observer.prepare('SELECT image_index, channel_id, task_id FROM generation_tasks ORDER BY image_index').all() as Array<{ task_id: string | null }>;
      const submissions = () => visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt).length;
      // Both tasks accepted and their ids stored before the crash.
      await until(() => tasks().filter((t) => t.task_id !== null).length === 2, 'both task ids stored');
      expect(submissions()).toBe(2);
      await first.stop('SIGKILL');
      expect(await inFlight).toBe('connection lost');
      const generation = () =>
        observer.prepare('SELECT id, status, credits, error_code, lease_owner FROM generations').get() as { id: string; status: string; credits: number; error_code: string | null };
      expect(generation().status).toBe('running');

      const second = await startGatewayProcess(env);
      started.push(second);
      await until(() => generation().status === 'succeeded', 'the takeover to finish the generation', 20_000);
      // Resumed, never repeated: no new submission, the same two tasks polled to their end.
      expect(submissions()).toBe(2);
      const polled = new Set(visual.requests.filter((r) => r.action === 'CVSync2AsyncGetResult').map((r) => r.body.task_id));
      expect([...polled].sort()).toEqual(tasks().map((t) => t.task_id).sort());
      // Books: charged what was delivered (2 images x 3 credits), and both images stored.
      const stored = observer.prepare('SELECT count(*) AS n FROM stored_images WHERE generation_id = ?').get(generation().id) as { n: number };
      expect(stored.n).toBe(2);
      const key = await new ApiClient(second.url).admin('get', `/admin/keys/${created.id}`);
      expect(key.body.credits_used).toBe(6);
      expect(generation().credits).toBe(6);
    } finally {
      observer.close();
    }
  });
});
