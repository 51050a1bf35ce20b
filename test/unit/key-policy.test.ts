import type { CatalogModel } from '../../src/config/catalog';
import { ApiError } from '../../src/errors/api-error';
import { thrownApiError } from '../helpers/thrown-api-error';
import type { ConcurrencyLeases, HeldLease } from '../../src/keys/concurrency-leases';
import {
  type ClientKeyPolicy,
  DEFAULT_ALERT_THRESHOLDS,
  checkClientIp,
  checkModelPermitted,
  checkPromptRules,
  clientKeyPolicy,
  effectivePromptRules,
  holdConcurrencySlot,
  modelForKey,
  modelsForKey,
  newKeyPolicyColumns,
  policyColumns,
  policyResource,
} from '../../src/keys/key-policy';

/** Key policy (docs/clients/keys-and-accounting.md, "Key policy"), without a database. */

const bounds = { min_pixels: 256, max_pixels: 1_048_576, min_ratio: 1 / 64, max_ratio: 64 };
const catalog: ReadonlyMap<string, CatalogModel> = new Map<string, CatalogModel>([
  ['local-1', { model: 'local-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '256x256', size_bounds: bounds }],
  [
    'seedream',
    { model: 'seedream', provider: 'jimeng', upstream_model: 'doubao-seedream-4-0-250828', credits_per_image: 4, default_size: '2048x2048', transport: 'ark' },
  ],
  ['dall-e', { model: 'dall-e', provider: 'openai', upstream_model: 'dall-e-3', credits_per_image: 8, default_size: '1024x1024' }],
]);

function policy(overrides: Partial<ClientKeyPolicy> = {}): ClientKeyPolicy {
  return { maxConcurrent: null, allowedIps: null, allowedModels: null, alertThresholds: DEFAULT_ALERT_THRESHOLDS, promptRules: null, ...overrides };
}

describe('policyColumns', () => {
  it('sets only the fields given', () => {
    expect(policyColumns({}, catalog)).toEqual({});
    expect(policyColumns({ max_concurrent: 3 }, catalog)).toEqual({ max_concurrent: 3 });
  });

  it('null removes a limit', () => {
    expect(policyColumns({ max_concurrent: null, allowed_ips: null, allowed_models: null }, catalog)).toEqual({
      max_concurrent: null,
      allowed_ips: null,
      allowed_models: null,
    });
  });

  it('stores allowed_ips as JSON, each entry trimmed; addresses and CIDRs of both families', () => {
    expect(policyColumns({ allowed_ips: [' 203.0.113.0/24', '198.51.100.7 ', '2001:db8::/32', '::1'] }, catalog)).toEqual({
      allowed_ips: JSON.stringify(['203.0.113.0/24', '198.51.100.7', '2001:db8::/32', '::1']),
    });
    expect(policyColumns({ allowed_ips: [] }, catalog)).toEqual({ allowed_ips: '[]' });
  });

  it('refuses an entry that is not an address or CIDR: 400 invalid_request, param allowed_ips, naming every bad entry', () => {
    const error = thrownApiError(() => policyColumns({ allowed_ips: ['10.0.0.0/8', '10.0.0.0/33', 'example.com', '2001:db8::/129'] }, catalog));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'allowed_ips' });
    expect(error.message).toBe('Not an IP address or CIDR: 10.0.0.0/33, example.com, 2001:db8::/129.');
  });

  it('checks allowed_models against the catalog: unknown ones are 400 invalid_request, param allowed_models', () => {
    expect(policyColumns({ allowed_models: ['seedream', 'local-1'] }, catalog)).toEqual({ allowed_models: '["seedream","local-1"]' });
    const error = thrownApiError(() => policyColumns({ allowed_models: ['seedream', 'nope', 'gpt-image-1'] }, catalog));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'allowed_models' });
    expect(error.message).toBe('Unknown model nope, gpt-image-1. Known models: local-1, seedream, dall-e.');
  });

  it('stores metadata as JSON and alert_thresholds sorted ascending, leaving the input as it was', () => {
    const thresholds = [100, 50, 90];
    expect(policyColumns({ metadata: { team: 'design' }, alert_thresholds: thresholds }, catalog)).toEqual({
      metadata: '{"team":"design"}',
      alert_thresholds: '[50,90,100]',
    });
    expect(thresholds).toEqual([100, 50, 90]);
    expect(policyColumns({ alert_thresholds: [] }, catalog)).toEqual({ alert_thresholds: '[]' });
  });

  it('validates before returning anything: one bad field refuses the whole input', () => {
    expect(() => policyColumns({ max_concurrent: 2, allowed_models: ['nope'] }, catalog)).toThrow(ApiError);
  });
});

describe('newKeyPolicyColumns', () => {
  it('defaults: no cap, anywhere, every model, empty metadata, thresholds [80, 100]', () => {
    expect(newKeyPolicyColumns({}, catalog)).toEqual({
      max_concurrent: null,
      allowed_ips: null,
      allowed_models: null,
      metadata: '{}',
      alert_thresholds: '[80,100]',
      prompt_rules: null,
    });
  });

  it('the given policy over the defaults', () => {
    expect(newKeyPolicyColumns({ max_concurrent: 1, allowed_models: ['dall-e'], alert_thresholds: [] }, catalog)).toEqual({
      max_concurrent: 1,
      allowed_ips: null,
      allowed_models: '["dall-e"]',
      metadata: '{}',
      alert_thresholds: '[]',
      prompt_rules: null,
    });
  });

  it('refuses what policyColumns refuses', () => {
    expect(thrownApiError(() => newKeyPolicyColumns({ allowed_ips: ['nope'] }, catalog)).param).toBe('allowed_ips');
  });
});

describe('policyResource and clientKeyPolicy', () => {
  it('round-trip the columns newKeyPolicyColumns / policyColumns write', () => {
    const input = { max_concurrent: 2, allowed_ips: ['10.0.0.0/8'], allowed_models: ['seedream'], metadata: { team: 'a' }, alert_thresholds: [100, 80, 50] };
    expect(policyResource(newKeyPolicyColumns(input, catalog))).toEqual({ ...input, alert_thresholds: [50, 80, 100], prompt_rules: null });
    expect(policyResource(newKeyPolicyColumns({}, catalog))).toEqual({
      max_concurrent: null,
      allowed_ips: null,
      allowed_models: null,
      metadata: {},
      alert_thresholds: [80, 100],
      prompt_rules: null,
    });
  });

  it('reads metadata as SQLite (text) and PostgreSQL (jsonb object) answer it', () => {
    const row = { max_concurrent: null, allowed_ips: null, allowed_models: null, alert_thresholds: '[80,100]' };
    expect(policyResource({ ...row, metadata: '{"k":"v"}' }).metadata).toEqual({ k: 'v' });
    expect(policyResource({ ...row, metadata: { k: 'v' } }).metadata).toEqual({ k: 'v' });
  });

  it('clientKeyPolicy is the same policy in the request-time shape', () => {
    const columns = newKeyPolicyColumns({ max_concurrent: 4, allowed_ips: ['::1'], allowed_models: [], alert_thresholds: [90] }, catalog);
    expect(clientKeyPolicy(columns)).toEqual({ maxConcurrent: 4, allowedIps: ['::1'], allowedModels: [], alertThresholds: [90], promptRules: null });
    expect(clientKeyPolicy(newKeyPolicyColumns({}, catalog))).toEqual({
      maxConcurrent: null,
      allowedIps: null,
      allowedModels: null,
      alertThresholds: [80, 100],
      promptRules: null,
    });
  });

  it('prompt rules: stored with ids, compiled once for requests; checkPromptRules refuses with the rule, never the text', () => {
    const columns = newKeyPolicyColumns(
      {
        prompt_rules: [
          { id: 'gr_brand', kind: 'blocked_term', term: 'AcmeCola' },
          { kind: 'max_length', max: 20 },
        ],
      },
      catalog,
    );
    const stored = policyResource(columns).prompt_rules;
    expect(stored).toEqual([
      { id: 'gr_brand', kind: 'blocked_term', term: 'AcmeCola' },
      { id: expect.stringMatching(/^gr_/), kind: 'max_length', max: 20 },
    ]);
    const policy = clientKeyPolicy(columns);
    expect(() => checkPromptRules(policy, 'a can of ACMECOLA')).toThrow(
      expect.objectContaining({ code: 'prompt_blocked', param: 'prompt', message: expect.stringContaining('gr_brand') }),
    );
    expect(thrownApiError(() => checkPromptRules(policy, 'a can of ACMECOLA')).message).not.toContain('ACMECOLA');
    expect(thrownApiError(() => checkPromptRules(policy, 'x'.repeat(21))).message).toContain(stored![1]!.id as string);
    expect(() => checkPromptRules(policy, 'a can of soda')).not.toThrow();
    expect(() => checkPromptRules(clientKeyPolicy(newKeyPolicyColumns({}, catalog)), 'anything at all')).not.toThrow();
    expect(thrownApiError(() => newKeyPolicyColumns({ prompt_rules: [{ kind: 'blocked_pattern', pattern: '(a)\\1' }] }, catalog)).param).toBe(
      'prompt_rules[0].pattern',
    );
  });
});

describe('effectivePromptRules', () => {
  const projectRules = [
    { id: 'gr_p_term', kind: 'blocked_term', term: 'logo' },
    { id: 'gr_p_len', kind: 'max_length', max: 50 },
  ] as const;
  const keyRules = [
    { id: 'gr_k_term', kind: 'blocked_term', term: 'brand' },
    { id: 'gr_k_len', kind: 'max_length', max: 80 },
  ] as const;

  it('none on either side: null (no check)', () => {
    expect(effectivePromptRules(null, null)).toBeNull();
  });

  it("the key's rules are added to its project's; of two max lengths the stricter holds", () => {
    const rules = effectivePromptRules([...keyRules], [...projectRules])!;
    expect(rules.check('a logo')).toMatchObject({ allowed: false, ruleId: 'gr_p_term' });
    expect(rules.check('a brand')).toMatchObject({ allowed: false, ruleId: 'gr_k_term' });
    expect(rules.check('x'.repeat(60))).toMatchObject({ allowed: false, ruleId: 'gr_p_len' });
    expect(rules.check('a cat')).toEqual({ allowed: true });
  });

  it('either side alone is checked as it is', () => {
    expect(effectivePromptRules(null, [...projectRules])!.check('a logo')).toMatchObject({ allowed: false, ruleId: 'gr_p_term' });
    expect(effectivePromptRules([...keyRules], null)!.check('a logo')).toEqual({ allowed: true });
  });
});

describe('checkClientIp', () => {
  it('null allows anywhere, including an unknown address', () => {
    expect(() => checkClientIp({ allowedIps: null }, '203.0.113.9')).not.toThrow();
    expect(() => checkClientIp({ allowedIps: null }, '')).not.toThrow();
  });

  it('allows addresses inside a listed CIDR or equal to a listed address (IPv4, IPv6, IPv4-mapped)', () => {
    const allowedIps = ['203.0.113.0/24', '198.51.100.7', '2001:db8::/32'];
    for (const ip of ['203.0.113.0', '203.0.113.255', '198.51.100.7', '::ffff:203.0.113.5', '2001:db8:ffff::1']) {
      expect(() => checkClientIp({ allowedIps }, ip)).not.toThrow();
    }
  });

  it('refuses everything else with 403 ip_not_allowed naming the address', () => {
    const allowedIps = ['203.0.113.0/24', '198.51.100.7', '2001:db8::/32'];
    for (const ip of ['203.0.114.0', '198.51.100.8', '2001:db9::1', 'unparsable:unknown']) {
      const error = thrownApiError(() => checkClientIp({ allowedIps }, ip));
      expect(error).toMatchObject({ code: 'ip_not_allowed', status: 403, param: null });
      expect(error.message).toBe(`This key may not be used from ${ip}.`);
    }
    expect(thrownApiError(() => checkClientIp({ allowedIps }, '')).message).toBe('This key may not be used from an unknown address.');
  });

  it('an empty list allows no address at all', () => {
    expect(thrownApiError(() => checkClientIp({ allowedIps: [] }, '127.0.0.1')).code).toBe('ip_not_allowed');
  });
});

describe('checkModelPermitted', () => {
  const entry = (model: string) => catalog.get(model) as CatalogModel;
  const all = ['local', 'jimeng', 'openai'];

  it('no model list: every model of an allowed provider', () => {
    expect(() => checkModelPermitted({ allowedProviders: all, policy: policy() }, entry('dall-e'))).not.toThrow();
  });

  it('a listed model passes; another is 403 model_not_allowed, param model, naming the allowed ones', () => {
    const key = { allowedProviders: all, policy: policy({ allowedModels: ['seedream', 'local-1'] }) };
    expect(() => checkModelPermitted(key, entry('seedream'))).not.toThrow();
    const error = thrownApiError(() => checkModelPermitted(key, entry('dall-e')));
    expect(error).toMatchObject({ code: 'model_not_allowed', status: 403, param: 'model' });
    expect(error.message).toBe('This key may not use model dall-e (allowed: seedream, local-1).');
  });

  it('a provider the key does not allow: 403 provider_not_allowed, param model, naming the allowed providers', () => {
    const error = thrownApiError(() => checkModelPermitted({ allowedProviders: ['local', 'openai'], policy: policy() }, entry('seedream')));
    expect(error).toMatchObject({ code: 'provider_not_allowed', status: 403, param: 'model' });
    expect(error.message).toBe(
      "Model seedream is served by provider jimeng; this key's allowed_providers are local, openai. An admin can add jimeng to the key's allowed_providers.",
    );
  });

  it('both refuse: the model list is checked first', () => {
    const key = { allowedProviders: ['local'], policy: policy({ allowedModels: ['local-1'] }) };
    expect(thrownApiError(() => checkModelPermitted(key, entry('seedream'))).code).toBe('model_not_allowed');
  });

  it('a listed model of a provider the key does not allow is still refused', () => {
    const key = { allowedProviders: ['local'], policy: policy({ allowedModels: ['seedream'] }) };
    expect(thrownApiError(() => checkModelPermitted(key, entry('seedream'))).code).toBe('provider_not_allowed');
  });

  it('matches model ids exactly', () => {
    const key = { allowedProviders: all, policy: policy({ allowedModels: ['seedream'] }) };
    expect(() => checkModelPermitted(key, { ...entry('seedream'), model: 'Seedream' })).toThrow(ApiError);
    expect(() => checkModelPermitted(key, { ...entry('seedream'), model: 'seedream ' })).toThrow(ApiError);
  });
});

describe('modelsForKey and modelForKey', () => {
  /** What a model priced at `credits` per image charges, as /v1/models publishes it. */
  const inCredits = (credits: number) => ({ currency: 'credits', terms: [{ meter: 'image', rate: credits }] });
  const everything = { allowedProviders: ['local', 'jimeng', 'openai'], policy: policy() };

  it('lists the catalog models in catalog order, as OpenAI model objects with size_bounds when known', () => {
    expect(modelsForKey(everything, catalog)).toEqual([
      {
        id: 'local-1',
        object: 'model',
        created: 0,
        owned_by: 'local',
        default_size: '256x256',
        credits_per_image: 1,
        credit_price: inCredits(1),
        size_bounds: bounds,
        max_prompt_chars: 4000,
      },
      {
        id: 'seedream',
        object: 'model',
        created: 0,
        owned_by: 'jimeng',
        default_size: '2048x2048',
        credits_per_image: 4,
        credit_price: inCredits(4),
        max_prompt_chars: 4000,
      },
      {
        id: 'dall-e',
        object: 'model',
        created: 0,
        owned_by: 'openai',
        default_size: '1024x1024',
        credits_per_image: 8,
        credit_price: inCredits(8),
        max_prompt_chars: 4000,
      },
    ]);
    expect(modelsForKey(everything, catalog)[1]).not.toHaveProperty('size_bounds');
  });

  it('only the models of the allowed providers, and of allowed_models when set (both must allow)', () => {
    const ids = (key: { allowedProviders: string[]; policy: ClientKeyPolicy }) => modelsForKey(key, catalog).map((model) => model.id);
    expect(ids({ allowedProviders: ['jimeng'], policy: policy() })).toEqual(['seedream']);
    expect(ids({ allowedProviders: ['local', 'jimeng', 'openai'], policy: policy({ allowedModels: ['dall-e', 'local-1'] }) })).toEqual(['local-1', 'dall-e']);
    expect(ids({ allowedProviders: ['jimeng'], policy: policy({ allowedModels: ['dall-e'] }) })).toEqual([]);
    expect(ids({ allowedProviders: [], policy: policy() })).toEqual([]);
  });

  it('modelForKey answers one model the key may use', () => {
    expect(modelForKey(everything, catalog, 'dall-e')).toEqual({
      id: 'dall-e',
      object: 'model',
      created: 0,
      owned_by: 'openai',
      default_size: '1024x1024',
      credits_per_image: 8,
      credit_price: inCredits(8),
      max_prompt_chars: 4000,
    });
  });

  it('modelForKey: 404 model_not_found for a model the catalog lacks, even when the key could not use it anyway', () => {
    const error = thrownApiError(() => modelForKey({ allowedProviders: [], policy: policy({ allowedModels: [] }) }, catalog, 'nope'));
    expect(error).toMatchObject({ code: 'model_not_found', status: 404, param: 'model' });
    expect(error.message).toBe('Unknown model nope. Known models: local-1, seedream, dall-e.');
  });

  it('modelForKey: 403 model_not_allowed when the provider or allowed_models excludes it', () => {
    const byProvider = thrownApiError(() => modelForKey({ allowedProviders: ['local'], policy: policy() }, catalog, 'seedream'));
    expect(byProvider).toMatchObject({ code: 'model_not_allowed', status: 403, param: 'model', message: 'This key may not use model seedream.' });
    const byModel = thrownApiError(() => modelForKey({ allowedProviders: ['jimeng'], policy: policy({ allowedModels: ['local-1'] }) }, catalog, 'seedream'));
    expect(byModel).toMatchObject({ code: 'model_not_allowed', param: 'model' });
  });
});

describe('holdConcurrencySlot', () => {
  /** Leases that grant `free` slots, recording what was asked. */
  function leases(free: number): ConcurrencyLeases & { asked: Array<[string, number]> } {
    const asked: Array<[string, number]> = [];
    return {
      asked,
      acquire: async (keyId, max) => {
        asked.push([keyId, max]);
        if (free <= 0) return undefined;
        free -= 1;
        return { release: async () => undefined };
      },
      close: async () => undefined,
    };
  }

  it('no cap: holds nothing and asks nothing', async () => {
    const store = leases(0);
    await expect(holdConcurrencySlot(store, { id: 'key_a', policy: policy() })).resolves.toBeUndefined();
    expect(store.asked).toEqual([]);
  });

  it('a cap without a lease store (none configured): holds nothing', async () => {
    await expect(holdConcurrencySlot(undefined, { id: 'key_a', policy: policy({ maxConcurrent: 1 }) })).resolves.toBeUndefined();
  });

  it('takes a slot of the key, capped at max_concurrent', async () => {
    const store = leases(1);
    const lease: HeldLease | undefined = await holdConcurrencySlot(store, { id: 'key_a', policy: policy({ maxConcurrent: 2 }) });
    expect(lease).toBeDefined();
    expect(store.asked).toEqual([['key_a', 2]]);
  });

  it('all slots taken: 429 concurrency_limited with Retry-After: 1', async () => {
    const error = await holdConcurrencySlot(leases(0), { id: 'key_a', policy: policy({ maxConcurrent: 3 }) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'concurrency_limited', status: 429, headers: { 'Retry-After': '1' } });
    expect((error as ApiError).message).toMatch(/already has 3 generations in flight/);
  });
});
