import { type FakeGemini, startFakeGemini } from '../fakes/fake-gemini';
import { Books } from '../helpers/books';
import { describeTakeovers, type TakeoverStage } from '../helpers/takeover-stages';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const GEMINI_API_KEY = 'gemini-takeover-key-0001';

/**
 * Issue #36 §2 "takeover by another replica without a second upstream submission", for the `gemini`
 * format (test/helpers/takeover-stages.ts). `generateContent` answers at once: there is no task to
 * resume, only calls that were sent. An asynchronous generation of two images has both calls held by
 * the fake when the process running it is SIGKILLed; the process that takes it over once the lease
 * lapsed finds both marked sent without an answer: it never sends them again (Google may have billed
 * them), fails the generation as `abandoned`, releases the key's credits and lists the two images as
 * the operator's loss; the books stay exact.
 */
async function takeover(gemini: FakeGemini, setup: TakeoverStage) {
  const { observer, receiver } = setup;
  const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 100, allowed_providers: ['google'] });
  const prompt = 'a harbour at dusk, taken over [hold]';
  const submitted = await new ApiClient(receiver.url).send('post', '/images/generate', {
    headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
    body: { prompt, model: 'gemini-3-pro-image', size: '2048x2048', n: 2 },
  });
  expect(submitted.status).toBe(202);
  const generationId = submitted.body.id as string;
  const generation = () => observer.db.selectFrom('generations').selectAll().where('id', '=', generationId).executeTakeFirstOrThrow();
  const callsOf = () => gemini.calls.filter((c) => JSON.stringify(c.body).includes(prompt));

  // Both calls written to Gemini (one per image) and held there, then the process running them dies.
  await until(() => callsOf().length === 2, 'both calls to reach Gemini');
  expect((await generation()).status).toBe('running');
  expect((await new ApiClient(receiver.url).admin('get', `/admin/keys/${created.id}`)).body.credits_used).toBe(28);
  const doomed = await setup.owner();
  await doomed.stop('SIGKILL');
  gemini.releaseHeld();

  const survivor = await setup.survivor(doomed);
  await until(async () => (await generation()).status === 'failed', 'the takeover to settle the generation', 40_000);
  const after = await generation();
  expect(after).toMatchObject({ error_code: 'abandoned', unbilled_reason: 'abandoned' });
  expect(Number(after.unbilled_images)).toBe(2);
  // Never sent a second time: Google may have made (and billed) both images already.
  expect(callsOf()).toHaveLength(2);
  const key = await new ApiClient(survivor.url).admin('get', `/admin/keys/${created.id}`);
  expect(key.body.credits_used).toBe(0);
  expect(await new Books(observer.db).violations({ settled: true })).toEqual([]);
}

describeTakeovers('gemini', {
  when: 'while both calls are at Gemini',
  startFake: () => startFakeGemini({ apiKey: GEMINI_API_KEY }),
  env: (gemini) => ({ GEMINI_API_KEY, GEMINI_BASE_URL: gemini.url }),
  outcome: 'settles it as abandoned without sending either call again; the key is charged nothing',
  run: takeover,
});
