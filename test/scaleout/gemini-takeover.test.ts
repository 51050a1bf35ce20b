import { type FakeGemini, startFakeGemini } from '../fakes/fake-gemini';
import { describeTakeovers, expectAbandonedAfterKill, type TakeoverStage } from '../helpers/takeover-stages';
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
  const { receiver } = setup;
  const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 100, allowed_providers: ['google'] });
  const prompt = 'a harbour at dusk, taken over [hold]';
  const submitted = await new ApiClient(receiver.url).send('post', '/images/generate', {
    headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
    body: { prompt, model: 'gemini-3-pro-image', size: '2048x2048', n: 2 },
  });
  expect(submitted.status).toBe(202);
  const callsOf = () => gemini.calls.filter((c) => JSON.stringify(c.body).includes(prompt));

  // Both calls written to Gemini (one per image) and held there.
  await until(() => callsOf().length === 2, 'both calls to reach Gemini');
  expect(await new ApiClient(receiver.url).creditsUsed(created.id)).toBe(28);
  await expectAbandonedAfterKill(setup, {
    generationId: submitted.body.id as string,
    keyId: created.id,
    images: 2,
    release: () => gemini.releaseHeld(),
    calls: () => callsOf().length,
  });
}

describeTakeovers('gemini', {
  when: 'while both calls are at Gemini',
  startFake: () => startFakeGemini({ apiKey: GEMINI_API_KEY }),
  env: (gemini) => ({ GEMINI_API_KEY, GEMINI_BASE_URL: gemini.url }),
  outcome: 'settles it as abandoned without sending either call again; the key is charged nothing',
  run: takeover,
});
