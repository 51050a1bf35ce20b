import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

const key = { name: 'reach', owner: 'reach@example.com', credits_quota: 100, quota_period_days: 30 };

describe('what models a new key can reach', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('without allowed_providers a key gets ["jimeng"]; local-1 is then refused naming the key\'s providers and the model\'s provider', async () => {
    const created = await t.api.admin('post', '/admin/keys', key);
    expect(created.status).toBe(201);
    expect(created.body.allowed_providers).toEqual(['jimeng']);
    const res = await t.api.client(created.body.key as string, localRequest());
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'provider_not_allowed', param: 'model' });
    expect(res.body.error.message).toBe(
      "Model local-1 is served by provider local; this key's allowed_providers are jimeng. An admin can add local to the key's allowed_providers.",
    );
  });

  it('allowed_models that none of allowed_providers serves: 400 on create, naming each model and its provider', async () => {
    const res = await t.api.admin('post', '/admin/keys', { ...key, allowed_providers: ['local'], allowed_models: ['jimeng-4.5'] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'allowed_models' });
    expect(res.body.error.message).toBe(
      'With allowed_providers [local] and allowed_models [jimeng-4.5] this key could use no model: jimeng-4.5 by jimeng. Add the provider to allowed_providers, or pick models of its providers.',
    );
  });

  it('allowed_models without allowed_providers: the default is named as such', async () => {
    const res = await t.api.admin('post', '/admin/keys', { ...key, allowed_models: ['local-1'] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'allowed_models' });
    expect(res.body.error.message).toContain('allowed_providers [jimeng] (the default when none is given) and allowed_models [local-1]');
  });

  it('allowed_providers whose provider serves no model of the catalog: 400 naming allowed_providers and who serves the catalog', async () => {
    const only = await startTestGateway({ MODEL_CATALOG: JSON.stringify([{ model: 'local-1', provider: 'local', credits_per_image: 1 }]) });
    try {
      const res = await only.api.admin('post', '/admin/keys', { ...key, allowed_providers: ['fal', 'bfl'] });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'allowed_providers' });
      expect(res.body.error.message).toBe("With allowed_providers [fal, bfl] this key could use no model: the catalog's models are served by local.");
    } finally {
      await only.close();
    }
  });

  it('an update that would leave the key no model is refused and changes nothing', async () => {
    const created = await t.api.admin('post', '/admin/keys', { ...key, allowed_providers: ['local', 'jimeng'], allowed_models: ['local-1'] });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const narrowed = await t.api.admin('patch', `/admin/keys/${id}`, { allowed_providers: ['jimeng'] });
    expect(narrowed.status).toBe(400);
    expect(narrowed.body.error).toMatchObject({ code: 'invalid_request', param: 'allowed_models' });
    const elsewhere = await t.api.admin('patch', `/admin/keys/${id}`, { allowed_providers: ['local'], allowed_models: ['jimeng-4.5'] });
    expect(elsewhere.status).toBe(400);
    const read = await t.api.admin('get', `/admin/keys/${id}`);
    expect(read.body).toMatchObject({ allowed_providers: ['local', 'jimeng'], allowed_models: ['local-1'] });
    // Both lists changed together to a pair that reaches a model: fine.
    const moved = await t.api.admin('patch', `/admin/keys/${id}`, { allowed_providers: ['jimeng'], allowed_models: ['jimeng-4.5'] });
    expect(moved.status).toBe(200);
  });
});
