import request from 'supertest';
import type { GatewayProcess } from '../helpers/gateway-process';
import type { GatewayDatabase } from '../../src/db/database';
import { Books } from '../helpers/books';
import { describeWithServices } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { startVisualReplicas, type VisualReplicas } from '../helpers/visual-replicas';

/**
 * Issue #29 §1: a synchronous generation running on replica A, canceled through replica B. The
 * cancel and the run's settlement are one conditional state change each, so exactly one wins: the
 * cancel answers 200 and the waiting client 409 with no image, and the key pays for the upstream
 * call that was sent. Before the fix the client got its image and nothing was charged.
 */
describeWithServices('cancel through another replica (2 replicas on PostgreSQL + Redis)', () => {
  let setup: VisualReplicas;
  let observer: GatewayDatabase;
  let replicas: GatewayProcess[];

  beforeAll(async () => {
    // A long lease: replica A learns of the cancel from its settlement, not from a renewal.
    setup = await startVisualReplicas(2, { GENERATION_LEASE_MS: '30000' });
    ({ observer, replicas } = setup);
  }, 120_000);
  afterAll(() => setup?.close());

  it('the cancel wins every time: the waiting client gets 409 and no image, the key pays for the call that was sent', async () => {
    const [a, b] = replicas as [GatewayProcess, GatewayProcess];
    const created = await createKeyVia(new ApiClient(a.url), { credits_quota: 1000, rate_limit_rpm: 1000, allowed_providers: ['jimeng'] });
    const books = new Books(observer.db);
    const rounds = 10;
    for (let round = 0; round < rounds; round += 1) {
      // ~40 polls of 20 ms: still generating when the cancel arrives.
      const prompt = `cancel round ${round} [pending:40]`;
      const waiting = request(a.url)
        .post('/images/generate')
        .set('Authorization', `Bearer ${created.key}`)
        .send({ prompt, model: 'jimeng-4.0', response_format: 'url' })
        .then((res) => res);
      const running = async () =>
        (await request(b.url).get('/generations?status=running').set('Authorization', `Bearer ${created.key}`)).body.data as Array<{ id: string }>;
      await until(async () => (await running()).length === 1, 'the generation to run on replica A');
      const [generation] = await running();
      const canceled = await request(b.url).post(`/generations/${generation!.id}/cancel`).set('Authorization', `Bearer ${created.key}`);
      expect([canceled.status, canceled.body.status]).toEqual([200, 'canceled']);
      const answer = await waiting;
      expect([answer.status, answer.body.error?.code]).toEqual([409, 'generation_finished']);
      expect(answer.body.data).toBeUndefined();
      expect(canceled.body.usage).toMatchObject({ credits_reserved: 0, credits_charged: 3 });
      // Whatever replica A stored for it is withdrawn: no URL of it can be served.
      const servable = await observer.db
        .selectFrom('stored_images')
        .select('id')
        .where('generation_id', '=', generation!.id)
        .where('expires_at', '>', Date.now())
        .where('deleted_at', 'is', null)
        .execute();
      expect(servable).toEqual([]);
      // Through A, which ran it, the same cancel is now a 409.
      expect((await request(a.url).post(`/generations/${generation!.id}/cancel`).set('Authorization', `Bearer ${created.key}`)).status).toBe(409);
    }
    const key = await new ApiClient(b.url).admin('get', `/admin/keys/${created.id}`);
    expect(key.body.credits_used).toBe(3 * rounds);
    expect(await books.violations({ settled: true })).toEqual([]);
  });
});
