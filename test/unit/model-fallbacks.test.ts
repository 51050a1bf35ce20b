import { fallsBack } from '../../src/channels/model-fallbacks';
import { type CatalogModel, DEFAULT_CATALOG, extendCatalog, fallbackChain, parseCatalog } from '../../src/config/catalog';
import { catalogFromEnv } from '../../src/config/config';
import { ApiError } from '../../src/errors/api-error';
import { heldFor, reservedCredits, unbilledOf } from '../../src/generation/charges';
import { onModel, type StoredGenerationRequest } from '../../src/generation/durable';
import { requestFallbacks } from '../../src/generation/fallback-chain';
import { failureOf } from '../../src/providers/error-table';
import { upstream, UpstreamError } from '../../src/providers/upstream-errors';

/** Model fallbacks (issue #36 §5) without a gateway: the catalog's checks and chains, the request's chain, its prices, the judge of a failure. */
const model = (name: string, extra: Record<string, unknown> = {}) => ({
  model: name,
  provider: 'local',
  upstream_model: 'local-1',
  credits_per_image: 1,
  default_size: '256x256',
  ...extra,
});

describe('catalog `fallbacks`', () => {
  it('parses an ordered list of other catalog models', () => {
    const catalog = parseCatalog([model('a', { fallbacks: ['b', 'c'] }), model('b'), model('c')]);
    expect(catalog[0]?.fallbacks).toEqual(['b', 'c']);
    expect(catalog[1]?.fallbacks).toBeUndefined();
  });

  it.each([
    ['an unknown model', [model('a', { fallbacks: ['nope'] })], /"fallbacks" names nope, which is not in the catalog/],
    ['the model itself', [model('a', { fallbacks: ['a'] })], /names a itself/],
    ['a model twice', [model('a', { fallbacks: ['b', 'b'] }), model('b')], /names b twice/],
    ['a string', [model('a', { fallbacks: 'b' }), model('b')], /must be an array of model names/],
    ['an empty name', [model('a', { fallbacks: [''] })], /must be an array of model names/],
    ['a cycle of two', [model('a', { fallbacks: ['b'] }), model('b', { fallbacks: ['a'] })], /cycle: a -> b -> a/],
    [
      'a cycle further down a chain',
      [model('a', { fallbacks: ['b'] }), model('b', { fallbacks: ['c'] }), model('c', { fallbacks: ['b'] })],
      /cycle: b -> c -> b/,
    ],
  ])('refuses %s', (_, raw, message) => {
    expect(() => parseCatalog(raw)).toThrow(message);
  });

  it('the additive form refuses removing a model another falls back to, and sets fallbacks on built-in models', () => {
    expect(() => extendCatalog({ models: [{ model: 'jimeng-4.5', fallbacks: ['jimeng-4.0'] }], remove: ['jimeng-4.0'] })).toThrow(
      /names jimeng-4.0, which is not in the catalog/,
    );
    const catalog = extendCatalog({ models: [{ model: 'jimeng-4.5', fallbacks: ['jimeng-5.0-lite', 'local-1'] }] });
    expect(catalog.find((entry) => entry.model === 'jimeng-4.5')?.fallbacks).toEqual(['jimeng-5.0-lite', 'local-1']);
    expect(DEFAULT_CATALOG.every((entry) => entry.fallbacks === undefined)).toBe(true);
  });

  it('MODEL_CATALOG with a cycle stops the configuration with the reason', () => {
    const raw = JSON.stringify([model('a', { fallbacks: ['b'] }), model('b', { fallbacks: ['a'] })]);
    expect(() => catalogFromEnv({ MODEL_CATALOG: raw })).toThrow(/MODEL_CATALOG is invalid: "fallbacks" make a cycle: a -> b -> a/);
  });

  it('a chain is the fallbacks in order, each followed by its own, every model once', () => {
    const catalog = new Map(
      parseCatalog([model('a', { fallbacks: ['b', 'c'] }), model('b', { fallbacks: ['d', 'c'] }), model('c', { fallbacks: ['d'] }), model('d')]).map(
        (entry) => [entry.model, entry],
      ),
    );
    expect(fallbackChain(catalog.get('a')!, catalog).map((entry) => entry.model)).toEqual(['b', 'd', 'c']);
    expect(fallbackChain(catalog.get('c')!, catalog).map((entry) => entry.model)).toEqual(['d']);
    expect(fallbackChain(catalog.get('d')!, catalog)).toEqual([]);
  });
});

describe('requestFallbacks: the chain a request may take', () => {
  const catalog = new Map(
    parseCatalog([
      {
        model: 'a',
        provider: 'jimeng',
        transport: 'ark',
        upstream_model: 'a-up',
        credits_per_image: 3,
        default_size: '1024x1024',
        fallbacks: ['b', 'small', 'hq'],
      },
      { model: 'b', provider: 'jimeng', transport: 'ark', upstream_model: 'b-up', credits_per_image: 5, default_size: '1024x1024' },
      model('small'),
      {
        model: 'hq',
        provider: 'jimeng',
        transport: 'ark',
        upstream_model: 'hq-up',
        credits_per_image: 2,
        default_size: '1024x1024',
        price_table: [{ quality: 'high', credits: 9 }],
      },
    ]).map((entry) => [entry.model, entry]),
  );
  const a = catalog.get('a')!;
  const names = (entries: CatalogModel[]) => entries.map((entry) => entry.model);
  const key = (allowedModels: string[] | null, allowedProviders = ['jimeng', 'local']) => ({
    allowedProviders,
    policy: { allowedModels, maxConcurrent: null, allowedIps: null, alertThresholds: [], promptRules: null },
  });

  it('keeps the models the key may use, that take the size and the quality', () => {
    expect(names(requestFallbacks(a, catalog, { wanted: undefined, width: 1024, height: 1024 }))).toEqual(['b', 'small', 'hq']);
    expect(names(requestFallbacks(a, catalog, { wanted: true, width: 1024, height: 1024, key: key(['a', 'small']) }))).toEqual(['small']);
    expect(names(requestFallbacks(a, catalog, { wanted: true, width: 1024, height: 1024, key: key(null, ['jimeng']) }))).toEqual(['b', 'hq']);
    // The local renderer makes at most 1024 px a side.
    expect(names(requestFallbacks(a, catalog, { wanted: true, width: 2048, height: 2048 }))).toEqual(['b', 'hq']);
    // `hq` prices `high` only; the others name no quality and take any.
    expect(names(requestFallbacks(a, catalog, { wanted: true, width: 1024, height: 1024, quality: 'low' }))).toEqual(['b', 'small']);
  });

  it('`fallback: false` takes none', () => {
    expect(requestFallbacks(a, catalog, { wanted: false, width: 1024, height: 1024 })).toEqual([]);
  });
});

describe('prices over a chain', () => {
  const entry = (name: string, credits: number, extra: Partial<CatalogModel> = {}): CatalogModel => ({
    model: name,
    provider: 'jimeng',
    transport: 'ark',
    upstream_model: `${name}-up`,
    credits_per_image: credits,
    default_size: '1024x1024',
    ...extra,
  });
  const stored = (n: number, fallbacks?: CatalogModel[]): StoredGenerationRequest => ({
    entry: entry('a', 3),
    request: { prompt: 'p', upstreamModel: 'a-up', transport: 'ark', n, width: 1024, height: 1024, responseFormat: 'url' },
    keep_base64: false,
    mark_sends: true,
    ...(fallbacks ? { fallbacks } : {}),
  });

  it("the reservation is n x the dearest price of the chain (its price tables at the request's size)", () => {
    expect(reservedCredits(stored(2))).toBe(6);
    expect(reservedCredits(stored(2, [entry('b', 5), entry('c', 1)]))).toBe(10);
    expect(reservedCredits(stored(3, [entry('t', 1, { price_table: [{ max_pixels: 512 * 512, credits: 1 }, { credits: 7 }] })]))).toBe(21);
  });

  it("a generation holds for the model it runs on n x that model's price; without fallbacks, all it reserved", () => {
    const withFallbacks = stored(2, [entry('b', 5), entry('c', 1)]);
    expect(heldFor(withFallbacks, { credits: 10, images: 2 })).toEqual({ credits: 6, images: 2 });
    expect(heldFor(onModel(withFallbacks, 'b'), { credits: 10, images: 2 })).toEqual({ credits: 10, images: 2 });
    expect(heldFor(onModel(withFallbacks, 'c'), { credits: 10, images: 2 })).toEqual({ credits: 2, images: 2 });
    expect(heldFor(stored(2), { credits: 6, images: 2 })).toEqual({ credits: 6, images: 2 });
  });

  it("a stage of the chain asks that model's upstream, the rest as asked", () => {
    const stage = onModel(stored(2, [entry('b', 5, { transport: 'ark', upstream_options: { watermark: false } })]), 'b');
    expect(stage.entry.model).toBe('b');
    expect(stage.request).toEqual({
      prompt: 'p',
      upstreamModel: 'b-up',
      transport: 'ark',
      upstreamOptions: { watermark: false },
      n: 2,
      width: 1024,
      height: 1024,
      responseFormat: 'url',
    });
  });

  it('losses are counted per model of the chain: a call cut by a timeout on one, images made on the next', () => {
    const chain = stored(2, [entry('b', 5)]);
    const attempts = [
      { image_index: 0, outcome: 'failed', error_code: 'provider_timeout', model: 'a' },
      { image_index: 1, outcome: 'failed_over', error_code: 'provider_error', model: 'a' },
      { image_index: 0, outcome: 'succeeded', error_code: null, model: 'b' },
    ];
    expect(unbilledOf(chain, attempts, false)).toEqual({ images: 2, reason: 'partial_failure' });
    expect(unbilledOf(chain, attempts.slice(0, 2), false)).toEqual({ images: 1, reason: 'provider_timeout' });
  });
});

describe('fallsBack: the provider side of a failure, on every channel of the model', () => {
  const signal = new AbortController().signal;
  const failedWith = (error: unknown, succeeded = false) => ({
    ok: false as const,
    error,
    attempts: succeeded
      ? [{ generation_id: 'g', seq: 0, image_index: 0, channel_id: 'chn_a', outcome: 'succeeded', error_code: null, latency_ms: 1, started_at: 0 }]
      : [],
    losses: { billedUndelivered: 0, expiredCalls: [] },
  });

  it.each([
    ['no channel, or all down', new ApiError('provider_unavailable', 'x')],
    ['busy past the wait line', new UpstreamError('provider_busy', 'x')],
    ['a timeout', new ApiError('provider_timeout', 'x')],
    ['an account problem', failureOf('account', 'jimeng', 'SetLimitExceeded')],
    ["the channel's configuration", failureOf('configuration', 'jimeng', 'ModelNotOpen')],
    ['a refusal that proves nothing was accepted', upstream.failed('jimeng', 'HTTP 500', { safeElsewhere: true })],
  ])('falls back after %s', (_, error) => {
    expect(fallsBack(failedWith(error), signal)).toBe(true);
  });

  it.each([
    ['a refusal of the prompt', failureOf('content', 'jimeng', 'InputTextSensitiveContentDetected')],
    ['a withheld output', failureOf('output', 'jimeng', 'OutputImageSensitiveContentDetected')],
    ['an invalid request', new ApiError('invalid_request', 'x')],
    ['an answer after which the upstream may have accepted the call', upstream.failed('jimeng', 'HTTP 504', { safeElsewhere: false })],
    ["the gateway's own outage", new Error('database down')],
  ])('does not after %s', (_, error) => {
    expect(fallsBack(failedWith(error), signal)).toBe(false);
  });

  it('does not when part of the request was delivered, when the run was aborted, or after a success', () => {
    expect(fallsBack(failedWith(new ApiError('provider_unavailable', 'x'), true), signal)).toBe(false);
    const aborted = new AbortController();
    aborted.abort();
    expect(fallsBack(failedWith(new ApiError('provider_timeout', 'x')), aborted.signal)).toBe(false);
    expect(fallsBack({ ok: true, images: [], attempts: [], losses: { billedUndelivered: 0, expiredCalls: [] } }, signal)).toBe(false);
  });
});
