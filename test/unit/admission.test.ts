import type { CatalogModel } from '../../src/config/catalog';
import { ApiError } from '../../src/errors/api-error';
import { thrownApiError } from '../helpers/thrown-api-error';
import { GenerationAdmission } from '../../src/generation/admission';
import { DEFAULT_ALERT_THRESHOLDS } from '../../src/keys/key-policy';
import type { ClientKey } from '../../src/keys/key.model';
import type { GatewayMetrics } from '../../src/metrics/metrics';
import { ProviderRegistry } from '../../src/providers/registry';
import { UPSTREAM_MODELS } from '../../src/providers/upstream-models';
import { withRateLimitHolder } from '../../src/ratelimit/rate-limit-context';
import type { RateLimitDecision, RateLimiter } from '../../src/ratelimit/rate-limiter';

/** Whether a request may generate at all (model, key permissions, RPM), with fakes for everything it reads. */

const catalog: ReadonlyMap<string, CatalogModel> = new Map<string, CatalogModel>([
  ['local-1', { model: 'local-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '256x256' }],
  [
    'seedream',
    { model: 'seedream', provider: 'jimeng', upstream_model: 'doubao-seedream-4-0-250828', credits_per_image: 4, default_size: '2048x2048', transport: 'ark' },
  ],
  ['dall-e', { model: 'dall-e', provider: 'openai', upstream_model: 'dall-e-3', credits_per_image: 8, default_size: '1024x1024' }],
]);

function fakes(decision: RateLimitDecision = { allowed: true, limit: 30, remaining: 29, resetSeconds: 60 }) {
  const consumed: Array<[string, number, number]> = [];
  let refusals = 0;
  const rateLimiter: RateLimiter = {
    consume: async (keyId, limit, now) => {
      consumed.push([keyId, limit, now]);
      return decision;
    },
    peek: async () => decision,
    close: async () => undefined,
  };
  const metrics = { rateLimitRefusals: { inc: () => void (refusals += 1) } } as unknown as GatewayMetrics;
  const admission = new GenerationAdmission({
    catalog,
    providers: new ProviderRegistry(['local', 'jimeng', 'openai']),
    rateLimiter,
    clock: { now: () => 1_700_000_000_000 },
    metrics,
  });
  return { admission, consumed, refusals: () => refusals };
}

function key(overrides: Partial<ClientKey> = {}): ClientKey {
  return {
    id: 'key_a',
    keyHash: 'hash',
    rateLimitRpm: 30,
    allowedProviders: ['local', 'jimeng', 'openai'],
    creditsQuota: 100,
    quotaPeriodDays: 30,
    createdAt: 0,
    policy: { maxConcurrent: null, allowedIps: null, allowedModels: null, alertThresholds: DEFAULT_ALERT_THRESHOLDS, promptRules: null },
    project: null,
    ...overrides,
  };
}

describe('GenerationAdmission.modelFor', () => {
  const { admission } = fakes();

  it('answers the catalog entry of a known model', () => {
    expect(admission.modelFor('seedream')).toBe(catalog.get('seedream'));
  });

  it('an unknown model: 404 model_not_found, param model, listing the catalog', () => {
    const error = thrownApiError(() => admission.modelFor('nope'));
    expect(error).toMatchObject({ code: 'model_not_found', status: 404, param: 'model' });
    expect(error.message).toBe('Unknown model nope. Known models: local-1, seedream, dall-e.');
  });

  it('a provider override naming the provider that serves the model: the catalog entry', () => {
    expect(admission.modelFor('seedream', 'jimeng')).toBe(catalog.get('seedream'));
  });

  it('an unknown provider: 400 invalid_request, param provider, listing the registry (even for a known model)', () => {
    const error = thrownApiError(() => admission.modelFor('seedream', 'midjourney'));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'provider' });
    expect(error.message).toBe('Unknown provider midjourney. Known providers: local, jimeng, openai.');
  });

  it('a known model with another provider: 400 invalid_request, param provider', () => {
    const error = thrownApiError(() => admission.modelFor('seedream', 'openai'));
    expect(error).toMatchObject({ code: 'invalid_request', param: 'provider', message: 'Model seedream is served by jimeng, not openai.' });
  });

  it('an uncatalogued model with a provider (trusted callers): addressed upstream as it is, free, default size', () => {
    expect(admission.modelFor('some-new-image-model', 'openai')).toEqual({
      model: 'some-new-image-model',
      provider: 'openai',
      upstream_model: 'some-new-image-model',
      credits_per_image: 0,
      default_size: '1024x1024',
    });
  });

  it('jimeng: jimeng_* ids go to the visual API, others to Ark', () => {
    expect(admission.modelFor('jimeng_t2i_v31', 'jimeng').transport).toBe('visual');
    expect(admission.modelFor('doubao-seedream-3-0-t2i-250415', 'jimeng').transport).toBe('ark');
    expect(admission.modelFor('some-new-image-model', 'openai')).not.toHaveProperty('transport');
  });

  it('takes size_bounds from the upstream-model table when it knows the model', () => {
    const sizes = (match: string) => UPSTREAM_MODELS.find((spec) => spec.match === match)?.sizes;
    expect(admission.modelFor('jimeng_t2i_v40', 'jimeng').size_bounds).toEqual(sizes('jimeng_t2i_v40'));
    expect(sizes('doubao-seedream-4-5-*')).toBeDefined();
    expect(admission.modelFor('doubao-seedream-4-5-251128', 'jimeng').size_bounds).toEqual(sizes('doubao-seedream-4-5-*'));
    // In the table without sizes, and not in the table at all.
    expect(admission.modelFor('doubao-seededit-3-0-i2i-250628', 'jimeng')).not.toHaveProperty('size_bounds');
    expect(admission.modelFor('some-new-image-model', 'openai')).not.toHaveProperty('size_bounds');
    expect(admission.modelFor('gpt-image-1', 'openai').size_bounds?.allowed_sizes).toEqual(['1024x1024', '1536x1024', '1024x1536']);
  });
});

describe('GenerationAdmission.admitForKey', () => {
  it('a permitted model: its entry; the RPM decision, counted for the key at the clock time, recorded in the request context', async () => {
    const { admission, consumed } = fakes();
    const recorded: RateLimitDecision[] = [];
    const entry = await withRateLimitHolder({ record: (decision) => recorded.push(decision) }, () =>
      admission.admitForKey(key({ id: 'key_b', rateLimitRpm: 7 }), 'seedream'),
    );
    expect(entry).toEqual(catalog.get('seedream'));
    expect(consumed).toEqual([['key_b', 7, 1_700_000_000_000]]);
    expect(recorded).toEqual([{ allowed: true, limit: 30, remaining: 29, resetSeconds: 60 }]);
  });

  it('outside a rate-limited request the decision goes nowhere', async () => {
    const { admission } = fakes();
    await expect(admission.admitForKey(key(), 'seedream')).resolves.toEqual(catalog.get('seedream'));
  });

  it('over the limit: 429 rate_limited with Retry-After, counted in the metric, the decision still recorded for the headers', async () => {
    const over = { allowed: false, limit: 7, remaining: 0, resetSeconds: 12 };
    const { admission, refusals } = fakes(over);
    const recorded: RateLimitDecision[] = [];
    const error = await withRateLimitHolder({ record: (decision) => recorded.push(decision) }, () => admission.admitForKey(key(), 'dall-e')).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'rate_limited', status: 429, param: null, headers: { 'Retry-After': '12' } });
    expect((error as ApiError).message).toBe('Rate limit of 7 requests per minute reached; retry in 12 s.');
    expect(recorded).toEqual([over]);
    expect(refusals()).toBe(1);
  });

  it('check order: model known (404), model allowed (403), provider allowed (403); a refusal counts no request', async () => {
    const { admission, consumed } = fakes();
    const both = key({ allowedProviders: ['local'], policy: { ...key().policy, allowedModels: ['local-1'] } });
    await expect(admission.admitForKey(both, 'nope')).rejects.toMatchObject({ code: 'model_not_found', status: 404, param: 'model' });
    await expect(admission.admitForKey(both, 'seedream')).rejects.toMatchObject({ code: 'model_not_allowed', status: 403, param: 'model' });
    const providerOnly = key({ allowedProviders: ['local', 'openai'] });
    const error = await admission.admitForKey(providerOnly, 'seedream').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'provider_not_allowed', status: 403, param: 'model' });
    expect((error as ApiError).message).toBe(
      "Model seedream is served by provider jimeng; this key's allowed_providers are local, openai. An admin can add jimeng to the key's allowed_providers.",
    );
    expect(consumed).toEqual([]);
  });
});
