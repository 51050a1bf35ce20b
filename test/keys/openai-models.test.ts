import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * The OpenAI-shaped model reads, one describe per operation: success, refusals, and auth (no key and
 * a wrong one are 401; a key used from outside its `allowed_ips` is 403).
 */
describe('OpenAI model operations', () => {
  let t: TestGateway;
  let key: string;
  let elsewhere: string;
  beforeAll(async () => {
    t = await startTestGateway();
    key = (await t.createKey()).key;
    elsewhere = (await t.createKey({ allowed_ips: ['10.0.0.0/8'] })).key;
  });
  afterAll(() => t.close());

  const get = (path: string, bearer?: string) => t.api.send('get', path, { headers: bearer === undefined ? {} : { Authorization: `Bearer ${bearer}` } });

  async function expectRefusedCredentials(path: string): Promise<void> {
    const missing = await get(path);
    expect([missing.status, missing.body.error.code]).toEqual([401, 'missing_api_key']);
    const wrong = await get(path, 'hyai_not-a-key');
    expect([wrong.status, wrong.body.error.code]).toEqual([401, 'invalid_api_key']);
    const outside = await get(path, elsewhere);
    expect([outside.status, outside.body.error.code]).toEqual([403, 'ip_not_allowed']);
  }

  describe('GET /v1/models (listModelsOpenAI)', () => {
    it('lists the models the key may use; 400 for an unknown parameter', async () => {
      const list = await get('/v1/models', key);
      expect(list.status).toBe(200);
      expect(list.body.data.map((m: { id: string }) => m.id)).toContain('local-1');
      expect((await get('/v1/models?x=1', key)).status).toBe(400);
    });

    it('auth', () => expectRefusedCredentials('/v1/models'));
  });

  describe('GET /v1/models/{model} (getModelOpenAI)', () => {
    it('reads one model; 404 for an unknown one; 400 for an unknown parameter', async () => {
      const model = await get('/v1/models/local-1', key);
      expect([model.status, model.body.id]).toEqual([200, 'local-1']);
      expect((await get('/v1/models/no-such-model', key)).status).toBe(404);
      expect((await get('/v1/models/local-1?x=1', key)).status).toBe(400);
    });

    it('auth', () => expectRefusedCredentials('/v1/models/local-1'));
  });
});
