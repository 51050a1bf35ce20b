import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { describeTakeovers, expectAbandonedAfterKill, type TakeoverStage } from '../helpers/takeover-stages';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';

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
  const { receiver } = setup;
  const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 1000, allowed_providers: ['openai'] });
  const prompt = 'a lighthouse in a storm, taken over [hold]';
  const submitted = await new ApiClient(receiver.url).send('post', '/v1/images/generations', {
    headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
    body: { prompt, model: 'gpt-image-1', size: '1536x1024', n: 2, quality: 'low', background: 'opaque' },
  });
  expect(submitted.status).toBe(202);
  const callsOf = () => openai.requests.filter((r) => r.fields.prompt === prompt);

  // The one call (n = 2) written to OpenAI and held there, with the option the request gave.
  await openai.whenHeld();
  expect(callsOf().map((r) => r.fields)).toEqual([{ model: 'gpt-image-1', prompt, n: 2, size: '1536x1024', quality: 'low', background: 'opaque' }]);
  // Two images at gpt-image-1's low-quality 1536x1024 price ($0.016: 2 credits at a cent a credit).
  expect(await new ApiClient(receiver.url).creditsUsed(created.id)).toBe(2 * 2);
  await expectAbandonedAfterKill(setup, {
    generationId: submitted.body.id as string,
    keyId: created.id,
    images: 2,
    release: () => openai.releaseHeld(),
    calls: () => callsOf().length,
  });
}

describeTakeovers('openai', {
  when: 'while its call is at OpenAI',
  startFake: () => startFakeOpenAIImages({ apiKey: OPENAI_API_KEY }),
  env: (openai) => ({ OPENAI_API_KEY, OPENAI_BASE_URL: `${openai.url}/v1` }),
  outcome: 'settles it as abandoned without sending the call again; the key is charged nothing',
  run: takeover,
});
