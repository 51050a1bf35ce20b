import fc from 'fast-check';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/**
 * Property: whatever arrives (wrong types, missing fields, huge or odd strings, bogus auth,
 * path garbage), the gateway never answers 5xx, always answers errors in the documented envelope
 * with a status the spec documents (ApiClient checks every response against the spec), never
 * charges a refused request, and never echoes a secret.
 */
describe('fuzzing every operation', () => {
  let t: TestGateway;
  let clientKey: string;
  let clientKeyId: string;
  let charged = 0;
  const secrets: string[] = [];

  beforeAll(async () => {
    t = await startTestGateway({ LOG_LEVEL: 'silent' });
    const created = await t.createKey({ credits_quota: 1_000_000, rate_limit_rpm: 100_000, allowed_providers: ['local', 'jimeng'] });
    clientKey = created.key;
    clientKeyId = created.id;
    secrets.push(ADMIN_SECRET, clientKey);
  });
  afterAll(() => t.close());

  const oddString = fc.oneof(
    fc.string({ maxLength: 50 }),
    fc.string({ unit: 'grapheme', maxLength: 30 }),
    fc.constantFrom('', ' ', '\u0000', '💥'.repeat(100), 'x'.repeat(5000), '../../etc/passwd', '%00', '{"a":1}', 'null', '-1', '1e309'),
  );
  const anyJson = fc.oneof(fc.jsonValue({ maxDepth: 3 }), oddString, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
  /** A valid body with one field replaced, removed or added. */
  const mutate = (valid: Record<string, unknown>) =>
    fc.tuple(fc.constantFrom(...Object.keys(valid), 'extra_field'), fc.oneof(anyJson, fc.constant(undefined))).map(([field, value]) => {
      const body: Record<string, unknown> = { ...valid };
      if (value === undefined) delete body[field];
      else body[field] = value;
      return body;
    });

  const generateBody = mutate(localRequest({ size: '32x32' }) as Record<string, unknown>);
  const keyBody = mutate({ name: 'fuzz', owner: 'fuzz@example.com', credits_quota: 5, quota_period_days: 1, allowed_providers: ['local'] });
  const quotaBody = mutate({ credits_quota: 5, quota_period_days: 2, reset_usage: true });
  const patchBody = mutate({ name: 'n', rate_limit_rpm: 5, expires_at: null });
  const idSegment = fc.oneof(fc.constant('key_doesnotexist'), oddString.map(encodeURIComponent), fc.stringMatching(/^key_[0-9A-Za-z]{1,30}$/));

  const auth = fc.oneof(
    fc.constant<Record<string, string>>({}),
    fc.constant({ Authorization: `Bearer ${ADMIN_SECRET}` }),
    fc.constant('client').map(() => ({ Authorization: `Bearer ${clientKey}` })),
    oddString.map((s) => ({ Authorization: `Bearer ${s.replace(/[\r\n\u0000-\u001f\u007f-\uffff]/g, '')}` })),
    oddString.map((s) => ({ Authorization: s.replace(/[\r\n\u0000-\u001f\u007f-\uffff]/g, '') })),
    fc.constant('client').map(() => ({ Authorization: `Bearer ${clientKey.slice(0, -1)}x` })),
  );
  const contentType = fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'text/plain',
    'application/x-www-form-urlencoded',
    'application/merge-patch+json',
  );

  type Req = { method: 'get' | 'post' | 'patch' | 'delete' | 'put'; path: string; body?: unknown; raw?: string };
  const requests: fc.Arbitrary<Req> = fc.oneof(
    generateBody.map((body) => ({ method: 'post' as const, path: '/images/generate', body })),
    keyBody.map((body) => ({ method: 'post' as const, path: '/admin/keys', body })),
    fc
      .tuple(fc.constantFrom('', '?limit=2', '?status=expired', '?limit=0', '?cursor=abc', '?owner=', '?status=%00', '?limit=1e3'), fc.constant(0))
      .map(([q]) => ({
        method: 'get' as const,
        path: `/admin/keys${q}`,
      })),
    idSegment.map((id) => ({ method: 'get' as const, path: `/admin/keys/${id}` })),
    fc.tuple(idSegment, patchBody).map(([id, body]) => ({ method: 'patch' as const, path: `/admin/keys/${id}`, body })),
    idSegment.map((id) => ({ method: 'delete' as const, path: `/admin/keys/${id}` })),
    fc.tuple(idSegment, quotaBody).map(([id, body]) => ({ method: 'post' as const, path: `/admin/keys/${id}/quota`, body })),
    idSegment.map((id) => ({ method: 'post' as const, path: `/admin/keys/${id}/rotate` })),
    fc.constantFrom('/openapi.json', '/docs', '/openapi.json?x=1').map((path) => ({ method: 'get' as const, path })),
    fc.tuple(fc.constantFrom('get', 'post', 'put', 'patch', 'delete') as fc.Arbitrary<Req['method']>, fc.webPath()).map(([method, path]) => ({
      method,
      path: path.startsWith('/') ? path : `/${path}`,
    })),
    fc.tuple(fc.constantFrom('/images/generate', '/admin/keys'), fc.string({ maxLength: 300 })).map(([path, raw]) => ({ method: 'post' as const, path, raw })),
  );

  it('never 5xx, always the documented envelope, never a secret, never a charge for a refusal', async () => {
    await fc.assert(
      fc.asyncProperty(requests, auth, contentType, async (req, headers, type) => {
        const res = await t.api.send(req.method, req.path, {
          headers: { ...headers, 'Content-Type': type },
          // Sent as text so the declared content type, whatever it is, goes out unchanged.
          ...(req.raw !== undefined ? { rawBody: req.raw } : req.body !== undefined ? { rawBody: JSON.stringify(req.body) } : {}),
        });
        expect(res.status).toBeLessThan(500);
        if (res.status >= 400) {
          expect(res.body.error).toEqual(expect.objectContaining({ code: expect.any(String), message: expect.any(String), request_id: expect.any(String) }));
        }
        const text = res.text ?? '';
        for (const secret of secrets) expect(text).not.toContain(secret);
        if (req.path === '/images/generate' && res.status === 200) charged += res.body.usage.credits_charged as number;
      }),
      { numRuns: 2500, seed: Number(process.env.FUZZ_SEED ?? 20261122) },
    );
    const record = await t.api.admin('get', `/admin/keys/${clientKeyId}`);
    expect(record.body.credits_used).toBe(charged);
    const generations = await t.gateway.database.db.selectFrom('generations').select(['status', 'credits']).where('key_id', '=', clientKeyId).execute();
    expect(generations.filter((g) => g.status === 'queued' || g.status === 'running')).toEqual([]);
    expect(generations.filter((g) => g.status === 'succeeded').reduce((sum, g) => sum + g.credits, 0)).toBe(charged);
  }, 120_000);
});
