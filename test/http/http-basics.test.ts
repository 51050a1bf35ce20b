import request from 'supertest';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

describe('HTTP basics', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('404 not_found in the error envelope for unknown paths', async () => {
    const res = await t.api.send('get', '/no/such/thing');
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ code: 'not_found', type: 'not_found_error', param: null });
  });

  it('405 method_not_allowed with Allow for a known path', async () => {
    const res = await t.api.admin('put', '/admin/keys');
    expect(res.status).toBe(405);
    expect(res.body.error.code).toBe('method_not_allowed');
    expect(res.headers.allow).toMatch(/GET/);
  });

  it('echoes a sane X-Request-Id into the header and error body, replaces an unsafe one', async () => {
    const echoed = await t.api.send('post', '/images/generate', { body: localRequest(), headers: { 'X-Request-Id': 'trace-123' } });
    expect(echoed.headers['x-request-id']).toBe('trace-123');
    expect(echoed.body.error.request_id).toBe('trace-123');
    const replaced = await t.api.send('get', '/openapi.json', { headers: { 'X-Request-Id': 'bad id <script>' } });
    expect(replaced.headers['x-request-id']).toMatch(/^req_/);
  });

  it('logs one line per request with its full path, never its query string', async () => {
    await request(t.gateway.url).get('/docs/scalar.js?token=must-not-be-logged');
    const line = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && String(l.path).endsWith('scalar.js'));
    expect(line).toMatchObject({ method: 'GET', path: '/docs/scalar.js', status: 200 });
    expect(t.logs.join('\n')).not.toContain('must-not-be-logged');
  });

  it('sends security headers and no X-Powered-By', async () => {
    const res = await t.api.send('get', '/openapi.json');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['x-powered-by']).toBeUndefined();
  });

  it('GET /openapi.json (getOpenApiDocument) serves the gateway contract', async () => {
    const res = await t.api.send('get', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    expect(Object.keys(res.body.paths)).toEqual(expect.arrayContaining(['/images/generate', '/admin/keys', '/admin/keys/{id}']));
    const bad = await t.api.send('get', '/openapi.json?x=1');
    expect(bad.status).toBe(400);
  });

  it('GET /docs (getApiReference) serves Scalar with its bundle from this server, not a CDN', async () => {
    const page = await t.api.send('get', '/docs');
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<script src="\/docs\/scalar\.js\?v=[0-9a-f]{16}">/);
    expect(page.text).toContain('/openapi.json');
    expect(page.text).not.toMatch(/https?:\/\/(?!localhost)[^"' ]*\.(js|css)/);
    // A static asset, not an API response: fetched without the spec check.
    const bundle = await request(t.gateway.url).get('/docs/scalar.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers['content-type']).toMatch(/javascript/);
    expect(Number(bundle.headers['content-length'])).toBeGreaterThan(100_000);
  });
});

describe('LOG_REQUESTS=false', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ LOG_REQUESTS: 'false' });
  });
  afterAll(() => t.close());

  it('logs no line per request; the rest of the log is written as before', async () => {
    const { key } = await t.createKey();
    expect((await t.api.client(key, localRequest())).status).toBe(200);
    const lines = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.msg === 'request')).toEqual([]);
    // The log itself is on: the startup's configuration line is there.
    expect(lines.some((l) => l.msg === 'configuration')).toBe(true);
  });
});
