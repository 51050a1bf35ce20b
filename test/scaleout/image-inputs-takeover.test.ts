import type { GatewayDatabase } from '../../src/db/database';
import type { FakeVisual } from '../fakes/fake-volc-visual';
import { Books } from '../helpers/books';
import type { GatewayProcess } from '../helpers/gateway-process';
import { describeWithServices } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { dataUri, testPng } from '../helpers/test-images';
import { until } from '../helpers/until';
import { startVisualReplicas, type VisualReplicas } from '../helpers/visual-replicas';

/**
 * Issue #27 §1, "a replica killed mid-job with inputs is taken over without resubmission", on 2
 * replicas on PostgreSQL + Redis. An asynchronous jimeng-4.0 generation of 2 images with 2 input
 * images; one call in flight at a time at the account (PROVIDER_JIMENG_MAX_CONCURRENCY=1), so when
 * the visual API has accepted image 0's task (and fetched its inputs) image 1's call waits unsent.
 * The replica running it is SIGKILLed then; the survivor takes it over: it polls image 0's task
 * (never submitted again) and submits image 1, the one call never sent, with the same inputs, read
 * back from the store by id and served at its own address: the fake fetches the same bytes.
 */
describeWithServices('image inputs: a replica SIGKILLed mid-generation, taken over by another (2 replicas on PostgreSQL + Redis)', () => {
  let setup: VisualReplicas;
  let visual: FakeVisual;
  let observer: GatewayDatabase;
  let replicas: GatewayProcess[];

  beforeAll(async () => {
    setup = await startVisualReplicas(2, { GENERATION_LEASE_MS: '1000', GENERATION_POLL_MS: '100', PROVIDER_JIMENG_MAX_CONCURRENCY: '1' });
    ({ visual, observer, replicas } = setup);
  }, 120_000);
  afterAll(() => setup?.close());

  it('polls the accepted task (one submission), submits the unsent call with the same input bytes; charged per image delivered', async () => {
    const [receiver] = replicas as [GatewayProcess, GatewayProcess];
    const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 100, allowed_providers: ['jimeng'] });
    const books = new Books(observer.db);
    const inputs = [testPng(300, 200, { shade: 21 }), testPng(64, 96, { shade: 42 })];
    // ~300 polls of 20 ms (6 s): image 0's task is still generating when its replica dies, however slow
    // the machine, so image 1's call still waits for the account's one slot.
    const prompt = 'two references, taken over [pending:300]';
    const submitted = await new ApiClient(receiver.url).send('post', '/images/generate', {
      headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
      body: { prompt, model: 'jimeng-4.0', n: 2, images: inputs.map((bytes) => dataUri(bytes)) },
    });
    expect(submitted.status).toBe(202);
    const generationId = submitted.body.id as string;
    const generation = () => observer.db.selectFrom('generations').selectAll().where('id', '=', generationId).executeTakeFirstOrThrow();
    const tasks = () => observer.db.selectFrom('generation_tasks').selectAll().where('generation_id', '=', generationId).orderBy('image_index').execute();
    const submits = () => visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt);
    const received = () => visual.inputs.filter((i) => i.prompt === prompt);

    // Image 0 accepted (its task id stored) and its inputs fetched by the upstream; image 1 queued behind it, unsent.
    await until(
      async () => (await tasks()).some((task) => task.image_index === 0 && task.task_id !== null) && received().length === 1,
      'image 0 accepted and its inputs fetched',
    );
    const [firstTask] = await tasks();
    expect(await tasks()).toHaveLength(1);
    expect(submits()).toHaveLength(1);
    expect(received()[0]!.taskId).toBe(firstTask!.task_id);

    // The replica running it (its lease owner is host:pid:random) dies.
    const running = await generation();
    expect(running.status).toBe('running');
    const doomed = replicas.find((p) => running.lease_owner?.split(':')[1] === String(p.child.pid))!;
    expect(doomed).toBeDefined();
    const survivor = replicas.find((p) => p !== doomed)!;
    await doomed.stop('SIGKILL');

    await until(async () => (await generation()).status === 'succeeded', 'the survivor to finish it', 40_000);
    const after = await generation();
    expect(Number(after.runs)).toBe(2);
    expect(after.lease_owner).toBeNull();

    // Image 0: submitted once, by the dead replica, and polled to its end; image 1: submitted once, by the survivor.
    const allSubmits = submits();
    expect(allSubmits).toHaveLength(2);
    const stored = await tasks();
    expect(stored.map((task) => task.image_index)).toEqual([0, 1]);
    expect(stored[0]!.task_id).toBe(firstTask!.task_id);
    const polled = new Set(visual.requests.filter((r) => r.action === 'CVSync2AsyncGetResult').map((r) => r.body.task_id));
    expect(stored.every((task) => polled.has(task.task_id))).toBe(true);

    // The same inputs both times: the same stored images (by id), each replica's own signed URL, the same bytes fetched.
    const [before, resubmitted] = allSubmits.map((s) => s.body.image_urls as string[]) as [string[], string[]];
    const idsOf = (urls: string[]) => urls.map((url) => /\/images\/(img_[0-9A-Za-z]+)\?/.exec(url)?.[1]);
    expect(idsOf(resubmitted)).toEqual(idsOf(before));
    expect(before.every((url) => url.startsWith(`${doomed.url}/images/`))).toBe(true);
    expect(resubmitted.every((url) => url.startsWith(`${survivor.url}/images/`))).toBe(true);
    const fetched = received();
    expect(fetched).toHaveLength(2);
    for (const { images } of fetched) {
      expect(images.map((image) => [image?.format, image?.width, image?.height])).toEqual([
        ['png', 300, 200],
        ['png', 64, 96],
      ]);
      expect(images.map((image, i) => image!.bytes.equals(inputs[i]!))).toEqual([true, true]);
    }

    // Books: 2 images delivered at 3 credits, both outputs stored next to the 2 inputs.
    const images = await observer.db.selectFrom('stored_images').select(['role']).where('generation_id', '=', generationId).execute();
    expect(images.map((image) => image.role).sort()).toEqual(['input', 'input', 'output', 'output']);
    expect(Number(after.credits)).toBe(6);
    const key = await new ApiClient(survivor.url).admin('get', `/admin/keys/${created.id}`);
    expect(key.body.credits_used).toBe(6);
    expect(await books.violations({ settled: true })).toEqual([]);
  }, 60_000);
});
