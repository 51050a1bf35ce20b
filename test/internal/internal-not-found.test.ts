import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * The internal listener's 404 says how to open its reference: /docs needs the service-token headers
 * like every route of the internal API, which a browser does not send by itself.
 */
describe("the internal listener's 404", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('names /docs, the headers it needs, ways to send them from a browser, and the raw document', async () => {
    const res = await t.internal.send('get', '/nothing-here');
    expect([res.status, res.body.error.code]).toEqual([404, 'not_found']);
    expect(res.body.error.message).toMatch(/GET \/docs with the service-token headers \(CF-Access-Client-Id, CF-Access-Client-Secret\)/);
    expect(res.body.error.message).toMatch(/Cloudflare Access|extension/);
    expect(res.body.error.message).toContain('/api/v1/creative/openapi.json');
    // What it says works: the page with the headers, the page without them refused.
    expect((await t.internal.service('get', '/docs')).status).toBe(200);
    expect((await t.internal.send('get', '/docs')).status).toBe(401);
  });

  it('the public listener keeps its own (its /docs is open)', async () => {
    const res = await t.api.send('get', '/nothing-here');
    expect(res.body.error.message).toBe('No such route. See /docs for the API reference.');
    expect((await t.api.send('get', '/docs')).status).toBe(200);
  });
});
