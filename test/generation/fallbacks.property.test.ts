import fc from 'fast-check';
import type { Response } from 'supertest';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { Books, UPSTREAM_REFUSAL } from '../helpers/books';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Issue #36 §5 as a property: over random chains (the key's allowed models cut the catalog's chain,
 * `fallback: false` drops it), prices (each model's table by size), n, outages of any models of the
 * chain, cancels, refusals of the prompt and partial failures, synchronous and asynchronous:
 * - a generation is delivered by the first model of its chain that is not down, never after a refusal;
 * - while it runs it holds n x the dearest price of its chain, which is never less than its charge;
 * - it is charged n x the price of the model that delivered (a cancel: of the model running its calls), nothing when it fails;
 * - every image an upstream made is paid or listed as the operator's loss, and the key's books are exact.
 * Each model has one channel on a fake Ark account of its own, so the outage of one leaves the others serving.
 */
const ARK_KEY = 'ark-key-fallbacks-property';
const MODELS = ['m1', 'm2', 'm3', 'm4'] as const;
type Model = (typeof MODELS)[number];
const SMALL = 1024 * 1024;
const CATALOG = [
  { model: 'm1', credits_per_image: 6, price_table: [{ max_pixels: SMALL, credits: 3, tier: '1K' }, { credits: 6 }], fallbacks: ['m2', 'm3'] },
  { model: 'm2', credits_per_image: 4, price_table: [{ max_pixels: SMALL, credits: 5, tier: '1K' }, { credits: 4 }], fallbacks: ['m4'] },
  { model: 'm3', credits_per_image: 9, price_table: [{ max_pixels: SMALL, credits: 1, tier: '1K' }, { credits: 9 }], fallbacks: ['m4'] },
  { model: 'm4', credits_per_image: 2 },
].map((entry) => ({ provider: 'jimeng', transport: 'ark', upstream_model: `${entry.model}-up`, default_size: '1024x1024', ...entry }));
/** The catalog's chains (src/config/catalog.ts fallbackChain), written out: each model's fallbacks, each followed by its own. */
const CHAINS: Record<Model, Model[]> = { m1: ['m2', 'm4', 'm3'], m2: ['m4'], m3: ['m4'], m4: [] };
const SIZES = { small: '1024x1024', large: '1536x1536' } as const;

const priceOf = (model: Model, size: keyof typeof SIZES): number => {
  const entry = CATALOG.find((e) => e.model === model)!;
  return size === 'small' ? (entry.price_table?.[0]?.credits ?? entry.credits_per_image) : entry.credits_per_image;
};

interface Step {
  start: number;
  n: number;
  size: keyof typeof SIZES;
  fallback: boolean | undefined;
  /** Whether the requested model's account is down (answers 500) for this request, and whether each other model's is (by MODELS' order). */
  down: [boolean, boolean[]];
  /** deliver: held, then let go; cancel: held, then canceled; refuse: the prompt is refused; partial: one image is busy past the wait line. */
  outcome: 'deliver' | 'cancel' | 'refuse' | 'partial';
  async: boolean;
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  start: fc.nat(3),
  n: fc.integer({ min: 1, max: 3 }),
  size: fc.constantFrom('small' as const, 'large' as const),
  fallback: fc.constantFrom(true, false, undefined),
  // The requested model down half the time (so it falls back), any other about a quarter.
  down: fc.tuple(
    fc.boolean(),
    fc.array(
      fc.integer({ min: 0, max: 3 }).map((roll) => roll === 0),
      { minLength: 4, maxLength: 4 },
    ),
  ),
  outcome: fc.constantFrom('deliver' as const, 'deliver' as const, 'cancel' as const, 'refuse' as const, 'partial' as const),
  async: fc.boolean(),
});

const runArb = fc.record({
  // Most keys may use every model (the whole chain); the others a random part of it.
  allowed: fc.oneof({ weight: 2, arbitrary: fc.constant([...MODELS]) }, { weight: 3, arbitrary: fc.subarray([...MODELS], { minLength: 1 }) }),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 6 }),
});

describe('model fallbacks keep the books exact over random chains, prices, outages, cancels and partial failures', () => {
  let t: TestGateway;
  let books: Books;
  const fakes = new Map<Model, FakeImagesApi>();
  const stats = { runs: 0, steps: 0, fellBack: 0, delivered: 0, canceled: 0, failed: 0 };

  beforeAll(async () => {
    for (const model of MODELS) fakes.set(model, await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' }));
    t = await startTestGateway({
      MODEL_CATALOG: JSON.stringify(CATALOG),
      // Outages are per request here: no breaker opens, one busy answer is final, its cool-down short.
      PROVIDER_JIMENG_BREAKER_THRESHOLD: '1000',
      PROVIDER_JIMENG_MAX_ATTEMPTS: '1',
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '1',
      GENERATION_POLL_MS: '50',
    });
    books = new Books(t.gateway.database.db);
    for (const model of MODELS) {
      const res = await t.api.admin('post', '/admin/channels', {
        name: model,
        provider: 'jimeng',
        transport: 'ark',
        base_url: fakes.get(model)!.url,
        models: [{ model }],
        credentials: { api_key: ARK_KEY },
      });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => {
    console.log(`fallbacks property: ${JSON.stringify(stats)}`);
    await t.close();
    for (const fake of fakes.values()) await fake.close();
  });

  const db = () => t.gateway.database.db;
  const rowOf = (tag: string) => db().selectFrom('generations').selectAll().where('request', 'like', `%[tag:${tag}]%`).executeTakeFirst();
  const creditsUsed = async (id: string) =>
    Number((await db().selectFrom('api_keys').select('credits_used').where('id', '=', id).executeTakeFirstOrThrow()).credits_used);
  // The fake records a call just before it holds it (test/fakes/fake-images-api.ts), with nothing in between to wait for.
  const callsHeld = (fake: FakeImagesApi, tag: string) => fake.requests.filter((r) => String(r.prompt).includes(`[hold:${tag}]`)).length;
  const madeFor = (prompt: string) => [...fakes.values()].reduce((sum, fake) => sum + fake.made.filter((p) => p === prompt).length, 0);
  const settled = async (tag: string) => {
    await until(async () => ['succeeded', 'failed', 'canceled'].includes((await rowOf(tag))?.status ?? ''), `generation ${tag} to settle`, 20_000);
    return (await rowOf(tag))!;
  };

  it('holds after every request', async () => {
    let tags = 0;
    await fc.assert(
      fc.asyncProperty(runArb, async ({ allowed, steps }) => {
        stats.runs += 1;
        const { id, key } = await t.createKey({ allowed_providers: ['jimeng'], allowed_models: allowed, credits_quota: 1_000_000 });
        let charged = 0;
        try {
          for (const step of steps) {
            stats.steps += 1;
            tags += 1;
            const tag = `f${tags}`;
            const start = allowed[step.start % allowed.length] as Model;
            const chain = step.fallback === false ? [start] : [start, ...CHAINS[start].filter((model) => allowed.includes(model))];
            const isDown = (model: Model) => (model === start ? step.down[0] : step.down[1][MODELS.indexOf(model)] === true);
            for (const model of MODELS) fakes.get(model)!.setMode(isDown(model) ? 'failing' : 'normal');
            const delivering = chain.find((model) => !isDown(model));
            const held = delivering !== undefined && (step.outcome === 'deliver' || step.outcome === 'cancel');
            const prompt =
              `fallbacks [tag:${tag}]` +
              (held ? ` [hold:${tag}]` : '') +
              (step.outcome === 'refuse' ? ` ${UPSTREAM_REFUSAL}` : '') +
              (step.outcome === 'partial' ? ' [busy:1]' : '');
            const reserved = step.n * Math.max(...chain.map((model) => priceOf(model, step.size)));
            const price = delivering === undefined ? 0 : priceOf(delivering, step.size);
            const usedBefore = await creditsUsed(id);
            const body = {
              prompt,
              model: start,
              n: step.n,
              size: SIZES[step.size],
              response_format: 'b64_json',
              ...(step.fallback === undefined ? {} : { fallback: step.fallback }),
            };
            const sent = t.api.send('post', '/images/generate', {
              body,
              headers: { Authorization: `Bearer ${key}`, ...(step.async ? { Prefer: 'respond-async' } : {}) },
            });
            let response: Response | undefined;
            if (step.async) expect((await sent).status).toBe(202);
            if (held) {
              const fake = fakes.get(delivering)!;
              // A synchronous request answers only after its hold; an answer first is a failure the oracle did not expect.
              const early = step.async
                ? settled(tag).then((row) => Promise.reject(new Error(`settled before its hold: ${row.status} ${row.error_message}`)))
                : sent.then((res) => Promise.reject(new Error(`answered before its hold: ${res.status} ${res.text}`)));
              // Ark makes one call per image: all n held before anything is looked at or let go.
              await Promise.race([until(() => callsHeld(fake, tag) === step.n, `${step.n} calls of ${tag} held`, 20_000), early]);
              // Held on the delivering model: it runs there, holding the dearest price of its chain.
              const running = (await rowOf(tag))!;
              expect(running).toMatchObject({ status: 'running', model: delivering, requested_model: delivering === start ? null : start });
              expect(Number(running.credits)).toBe(reserved);
              expect((await creditsUsed(id)) - usedBefore).toBe(reserved);
              if (step.outcome === 'cancel') {
                const canceled = await t.api.send('post', `/generations/${running.id}/cancel`, { headers: { Authorization: `Bearer ${key}` } });
                expect(canceled.status).toBe(200);
                // Every call was sent (held upstream): the cancel keeps n x the running model's price.
                expect(canceled.body).toMatchObject({ status: 'canceled', model: delivering, usage: { credits_charged: step.n * price } });
              }
              fake.releaseHeld(tag);
            }
            if (!step.async) response = await sent;
            const row = await settled(tag);
            const expected =
              delivering === undefined || step.outcome === 'refuse' || step.outcome === 'partial'
                ? { status: step.outcome === 'cancel' && delivering !== undefined ? 'canceled' : 'failed', charge: 0 }
                : { status: step.outcome === 'cancel' ? 'canceled' : 'succeeded', charge: step.n * price };
            expect(row.status).toBe(expected.status);
            const rowCharge = row.status === 'succeeded' ? Number(row.credits) : Number(row.charged_credits ?? 0);
            expect(rowCharge).toBe(expected.charge);
            expect(rowCharge).toBeLessThanOrEqual(reserved);
            charged += rowCharge;
            if (row.status === 'succeeded') {
              stats.delivered += 1;
              if (delivering !== start) stats.fellBack += 1;
              expect(row).toMatchObject({ model: delivering, requested_model: delivering === start ? null : start, images: step.n });
              if (response) {
                expect(response.status).toBe(200);
                expect(response.body).toMatchObject({
                  model: delivering,
                  requested_model: start,
                  usage: { images: step.n, credits_charged: step.n * price, credits_per_image: price },
                });
              }
              // The attempts show the chain: each model tried, in order, up to the one that delivered.
              const attempts = await db()
                .selectFrom('generation_attempts')
                .select(['model', 'outcome'])
                .where('generation_id', '=', row.id)
                .orderBy('seq')
                .execute();
              expect([...new Set(attempts.map((a) => a.model))]).toEqual(chain.slice(0, chain.indexOf(delivering!) + 1));
            } else if (row.status === 'canceled') {
              stats.canceled += 1;
              if (response) expect(response.body.error.code).toBe('generation_finished');
            } else {
              stats.failed += 1;
              // Every model down: the last one's 502. A refusal: 400 at once. One image busy past the wait line: 503 where
              // another image was delivered (n > 1); with n = 1 every model of the chain is busy or down, and the last one answers.
              const last = chain[chain.length - 1] as Model;
              const status = delivering === undefined ? 502 : step.outcome === 'refuse' ? 400 : step.n > 1 ? 503 : isDown(last) ? 502 : 503;
              if (response) expect(response.status).toBe(status);
              else expect(row.error_code).toBe({ 400: 'content_policy_violation', 502: 'provider_error', 503: 'provider_busy' }[status]);
              if (step.outcome === 'refuse' && delivering !== undefined) {
                // Never past a refusal of the prompt: the models after it saw nothing.
                for (const later of chain.slice(chain.indexOf(delivering) + 1))
                  expect(fakes.get(later)!.requests.some((r) => String(r.prompt).includes(`[tag:${tag}]`))).toBe(false);
              }
            }
            // Every image made upstream is paid (delivered, or kept by the cancel) or listed as the operator's loss.
            const paid = row.status === 'succeeded' ? step.n : row.status === 'canceled' ? step.n : 0;
            expect(madeFor(prompt)).toBeLessThanOrEqual(paid + Number(row.unbilled_images ?? 0));
            expect(await books.violations({ keyId: id })).toEqual([]);
          }
          expect(await creditsUsed(id)).toBe(charged);
          expect(await books.violations({ keyId: id, settled: true })).toEqual([]);
        } finally {
          for (const fake of fakes.values()) {
            fake.setMode('normal');
            fake.releaseHeld();
          }
        }
      }),
      { numRuns: Number(process.env.FALLBACK_RUNS ?? 40), ...(process.env.FALLBACK_SEED ? { seed: Number(process.env.FALLBACK_SEED) } : {}) },
    );
  }, 180_000);
});
