import { decodeHandle } from '../../src/providers/fal/fal-client';
import { type FakeFal, startFakeFal } from '../fakes/fake-fal';
import { Books } from '../helpers/books';
import { describeTakeovers, type TakeoverStage } from '../helpers/takeover-stages';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const FAL_KEY = 'fal-takeover-id:fal-takeover-secret';

/**
 * Issue #36 §2 "takeover by another replica without a second upstream submission", for the `fal`
 * format (the stages of test/helpers/takeover-stages.ts): an asynchronous generation whose fal
 * request is queued (held by the fake) when the process running it is SIGKILLed. The process that
 * takes it over once its lease lapsed polls the stored handle (the request's own status and response
 * URLs): fal sees one submission, no cancel (the dead process sent none), and the books charge the
 * images delivered.
 */
async function takeover(fal: FakeFal, setup: TakeoverStage) {
  const { observer, receiver } = setup;
  const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 100, allowed_providers: ['fal'] });
  const prompt = 'a harbour at dusk, taken over [hold]';
  const submitted = await new ApiClient(receiver.url).send('post', '/images/generate', {
    headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
    body: { prompt, model: 'fal-flux-dev', size: '1024x768', n: 2 },
  });
  expect(submitted.status).toBe(202);
  const generationId = submitted.body.id as string;
  const generation = () => observer.db.selectFrom('generations').selectAll().where('id', '=', generationId).executeTakeFirstOrThrow();
  const tasks = () => observer.db.selectFrom('generation_tasks').selectAll().where('generation_id', '=', generationId).execute();
  const submits = () => fal.submits.filter((s) => s.body.prompt === prompt);

  // Accepted by fal (one request for both images) and its handle stored, then the process running it dies.
  await until(async () => (await tasks()).some((task) => task.task_id !== null), 'the fal request handle to be stored');
  expect(submits()).toHaveLength(1);
  const [task] = await tasks();
  expect(decodeHandle(task!.task_id).request_id).toBe(submits()[0]!.requestId);
  expect((await generation()).status).toBe('running');
  const doomed = await setup.owner();
  await doomed.stop('SIGKILL');
  fal.releaseHeld();

  const survivor = await setup.survivor(doomed);
  await until(async () => (await generation()).status === 'succeeded', 'the takeover to finish the generation', 40_000);
  const after = await generation();
  expect(Number(after.runs)).toBe(2);
  // Resumed, never repeated, never cancelled: the one request polled to its end.
  expect(submits()).toHaveLength(1);
  expect(fal.cancelCalls.filter((c) => c.requestId === submits()[0]!.requestId)).toEqual([]);
  const stored = await observer.db.selectFrom('stored_images').select('id').where('generation_id', '=', generationId).execute();
  expect(stored).toHaveLength(2);
  const key = await new ApiClient(survivor.url).admin('get', `/admin/keys/${created.id}`);
  // Two images of about 1 MP each, billed by fal per megapixel: $0.05 at a cent a credit.
  expect(key.body.credits_used).toBe(5);
  expect(await new Books(observer.db).violations({ settled: true })).toEqual([]);
}

describeTakeovers('fal', {
  when: 'while the request is queued at fal',
  startFake: () => startFakeFal({ apiKey: FAL_KEY }),
  env: (fal) => ({ FAL_KEY, FAL_BASE_URL: fal.url, UPSTREAM_POLL_INTERVAL_MS: '20' }),
  outcome: 'polls the stored handle instead of submitting again; credits charged = images delivered',
  run: takeover,
});
