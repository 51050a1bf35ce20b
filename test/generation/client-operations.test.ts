import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/**
 * The client's reads and cancel, one describe per operation: its success, its refusals, and its
 * auth (no key, a wrong key, a key used from outside its `allowed_ips`). A database outage (503) needs
 * a real dependency fault: test/dependencies.
 */
describe('client operations on generations', () => {
  let t: TestGateway;
  let key: string;
  /** A key that may only be used from 10.0.0.0/8: the tests call from 127.0.0.1. */
  let elsewhere: string;
  let generationId: string;
  beforeAll(async () => {
    t = await startTestGateway();
    key = (await t.createKey()).key;
    elsewhere = (await t.createKey({ allowed_ips: ['10.0.0.0/8'] })).key;
    const made = await t.api.client(key, localRequest());
    expect(made.status).toBe(200);
    generationId = made.body.id as string;
  });
  afterAll(() => t.close());

  const as = (method: 'get' | 'post', path: string, bearer?: string) =>
    t.api.send(method, path, { headers: bearer === undefined ? {} : { Authorization: `Bearer ${bearer}` } });

  /** 401 without a key and with a wrong one; 403 ip_not_allowed for a key used from outside its list. */
  async function expectRefusedCredentials(method: 'get' | 'post', path: string): Promise<void> {
    const missing = await as(method, path);
    expect([missing.status, missing.body.error.code]).toEqual([401, 'missing_api_key']);
    const wrong = await as(method, path, 'hyai_not-a-key');
    expect([wrong.status, wrong.body.error.code]).toEqual([401, 'invalid_api_key']);
    const outside = await as(method, path, elsewhere);
    expect([outside.status, outside.body.error.code]).toEqual([403, 'ip_not_allowed']);
  }

  describe('GET /generations (listGenerations)', () => {
    it('lists the key’s generations; 400 for a bad limit', async () => {
      const list = await as('get', '/generations', key);
      expect(list.status).toBe(200);
      expect(list.body.data.map((g: { id: string }) => g.id)).toContain(generationId);
      const bad = await as('get', '/generations?limit=0', key);
      expect([bad.status, bad.body.error.param]).toEqual([400, 'limit']);
    });

    it('auth', () => expectRefusedCredentials('get', '/generations'));
  });

  describe('GET /generations/{id} (getGeneration)', () => {
    it('reads the key’s own generation; 404 for an unknown one; 400 for an unknown parameter', async () => {
      const own = await as('get', `/generations/${generationId}`, key);
      expect([own.status, own.body.id]).toEqual([200, generationId]);
      expect((await as('get', '/generations/gen_unknown0', key)).status).toBe(404);
      expect((await as('get', `/generations/${generationId}?x=1`, key)).status).toBe(400);
    });

    it('auth', () => expectRefusedCredentials('get', `/generations/${generationId}`));
  });

  describe('POST /generations/{id}/cancel (cancelGeneration)', () => {
    // Its success, cancelling a running generation, is in async-generations.test.ts (it needs one held upstream).
    it('409 once the generation finished; 404 for an unknown one; 400 for an unknown parameter', async () => {
      expect((await as('post', `/generations/${generationId}/cancel`, key)).status).toBe(409);
      expect((await as('post', '/generations/gen_unknown0/cancel', key)).status).toBe(404);
      expect((await as('post', `/generations/${generationId}/cancel?x=1`, key)).status).toBe(400);
    });

    it('auth', () => expectRefusedCredentials('post', `/generations/${generationId}/cancel`));
  });

  describe('GET /v1/webhook-secret (getWebhookSigningSecret)', () => {
    it('answers the key’s signing secret, the same each time; 400 for an unknown parameter', async () => {
      const first = await as('get', '/v1/webhook-secret', key);
      expect(first.status).toBe(200);
      expect((await as('get', '/v1/webhook-secret', key)).body).toEqual(first.body);
      expect((await as('get', '/v1/webhook-secret?x=1', key)).status).toBe(400);
    });

    it('auth', () => expectRefusedCredentials('get', '/v1/webhook-secret'));
  });
});
