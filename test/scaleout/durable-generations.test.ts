import SQLite from 'better-sqlite3';
import request from 'supertest';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import type { GatewayDatabase } from '../../src/db/database';
import { Books } from '../helpers/books';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { startVisualReplicas, type VisualReplicas } from '../helpers/visual-replicas';

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
      const tasks = () =>
        observer.prepare('SELECT image_index, channel_id, task_id FROM generation_tasks ORDER BY image_index').all() as Array<{ task_id: string | null }>;
      const submissions = () => visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt).length;
      // Both tasks accepted and their ids stored before the crash.
      await until(() => tasks().filter((t) => t.task_id !== null).length === 2, 'both task ids stored');
      expect(submissions()).toBe(2);
      await first.stop('SIGKILL');
      expect(await inFlight).toBe('connection lost');
      const generation = () =>
        observer.prepare('SELECT id, status, credits, error_code, lease_owner FROM generations').get() as {
          id: string;
          status: string;
          credits: number;
          error_code: string | null;
        };
      expect(generation().status).toBe('running');

      const second = await startGatewayProcess(env);
      started.push(second);
      await until(() => generation().status === 'succeeded', 'the takeover to finish the generation', 20_000);
      // Resumed, never repeated: no new submission, the same two tasks polled to their end.
      expect(submissions()).toBe(2);
      const polled = new Set(visual.requests.filter((r) => r.action === 'CVSync2AsyncGetResult').map((r) => r.body.task_id));
      expect([...polled].sort()).toEqual(
        tasks()
          .map((t) => t.task_id)
          .sort(),
      );
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

/**
 * The same on PostgreSQL + Redis with 3 replicas: the replica running the generation is SIGKILLed
 * while the visual API holds its tasks; another replica takes it over once its lease lapsed
 * (SKIP LOCKED: exactly one does), polls the stored tasks, and the books balance.
 */
describeWithServices('durable generations: 3 replicas on PostgreSQL + Redis, one SIGKILLed mid-generation', () => {
  let setup: VisualReplicas;
  let visual: FakeVisual;
  let observer: GatewayDatabase;
  let processes: GatewayProcess[];

  beforeAll(async () => {
    setup = await startVisualReplicas(3, { GENERATION_LEASE_MS: '1000', GENERATION_POLL_MS: '100' });
    ({ visual, observer, replicas: processes } = setup);
  }, 120_000);
  afterAll(() => setup?.close());

  it('another replica resumes the stored tasks: one submission per image, credits charged = images delivered', async () => {
    const [doomed] = processes as [GatewayProcess];
    const created = await createKeyVia(new ApiClient(doomed.url), { credits_quota: 100, allowed_providers: ['jimeng'] });
    const books = new Books(observer.db);
    const prompt = 'a harbour at night [pending:100]';
    const inFlight = request(doomed.url)
      .post('/images/generate')
      .set('Authorization', `Bearer ${created.key}`)
      .send({ prompt, model: 'jimeng-4.0', n: 2 })
      .then(
        () => 'answered',
        () => 'connection lost',
      );
    const tasks = () => observer.db.selectFrom('generation_tasks').selectAll().orderBy('image_index').execute();
    const submissions = () => visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt).length;
    await until(async () => (await tasks()).filter((t) => t.task_id !== null).length === 2, 'both task ids stored');
    await doomed.stop('SIGKILL');
    expect(await inFlight).toBe('connection lost');
    const generation = () => observer.db.selectFrom('generations').selectAll().executeTakeFirstOrThrow();
    const before = await generation();
    expect(before.status).toBe('running');
    await until(async () => (await generation()).status === 'succeeded', 'another replica to finish it', 20_000);
    const after = await generation();
    // Taken over by a surviving replica, exactly once.
    expect(after.lease_owner).toBeNull();
    expect(Number(after.runs)).toBe(2);
    expect(submissions()).toBe(2);
    const stored = await observer.db.selectFrom('stored_images').select('id').where('generation_id', '=', after.id).execute();
    expect(stored).toHaveLength(2);
    const key = await new ApiClient(processes[1]!.url).admin('get', `/admin/keys/${created.id}`);
    expect(key.body.credits_used).toBe(6);
    expect(await books.violations({ settled: true })).toEqual([]);
  });
});
