import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { Books } from '../helpers/books';
import { describeTakeovers, type TakeoverStage } from '../helpers/takeover-stages';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const OPENAI_API_KEY = 'sk-openai-takeover-0001';

/**
 * Issue #36 §2 "takeover by another replica without a second upstream submission", for the `openai`
 * format (test/helpers/takeover-stages.ts). OpenAI's Images API answers at once: there is no task to
 * resume, only a call that was sent. An asynchronous generation of two images on gpt-image-1 is one
 * call (`n: 2`), held by the fake when the process running it is SIGKILLed; the process that takes it
 * over once the lease lapsed finds the call marked sent without an answer: it never sends it again
 * (OpenAI may have made and billed both images), fails the generation as `abandoned`, releases the
 * key's credits and lists the two images as the operator's loss; the books stay exact.
 */
async function takeover(openai: FakeOpenAIImages, setup: TakeoverStage) {
  const { observer, receiver } = setup;
  const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 1000, allowed_providers: ['openai'] });
  const prompt = 'a lighthouse in a storm, taken over [hold]';
  const submitted = await new ApiClient(receiver.url).send('post', '/v1/images/generations', {
    headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
    body: { prompt, model: 'gpt-image-1', size: '1536x1024', n: 2, quality: 'low', background: 'opaque' },
  });
  expect(submitted.status).toBe(202);
  const generationId = submitted.body.id as string;
  const generation = () => observer.db.selectFrom('generations').selectAll().where('id', '=', generationId).executeTakeFirstOrThrow();
  const callsOf = () => openai.requests.filter((r) => r.fields.prompt === prompt);

  // The one call (n = 2) written to OpenAI and held there, then the process running it dies.
  await openai.whenHeld();
  expect(callsOf().map((r) => r.fields)).toEqual([{ model: 'gpt-image-1', prompt, n: 2, size: '1536x1024', quality: 'low', background: 'opaque' }]);
  expect((await generation()).status).toBe('running');
  // Two images at gpt-image-1's low-quality 1536x1024 price.
  expect((await new ApiClient(receiver.url).admin('get', `/admin/keys/${created.id}`)).body.credits_used).toBe(2 * 16);
  const doomed = await setup.owner();
  await doomed.stop('SIGKILL');
  openai.releaseHeld();

  const survivor = await setup.survivor(doomed);
  await until(async () => (await generation()).status === 'failed', 'the takeover to settle the generation', 40_000);
  const after = await generation();
  expect(after).toMatchObject({ error_code: 'abandoned', unbilled_reason: 'abandoned' });
  expect(Number(after.unbilled_images)).toBe(2);
  // Never sent a second time.
  expect(callsOf()).toHaveLength(1);
  const key = await new ApiClient(survivor.url).admin('get', `/admin/keys/${created.id}`);
  expect(key.body.credits_used).toBe(0);
  expect(await new Books(observer.db).violations({ settled: true })).toEqual([]);
}

describeTakeovers('openai', {
  when: 'while its call is at OpenAI',
  startFake: () => startFakeOpenAIImages({ apiKey: OPENAI_API_KEY }),
  env: (openai) => ({ OPENAI_API_KEY, OPENAI_BASE_URL: `${openai.url}/v1` }),
  outcome: 'settles it as abandoned without sending the call again; the key is charged nothing',
  run: takeover,
});
