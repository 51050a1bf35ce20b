import { decodeJwt, SignJWT } from 'jose';
import { makeKey, operationsAccepting, startJwksServer } from '../helpers/access-jwt';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

const TEAM = 'https://test-team.cloudflareaccess.com';
const INTERNAL_AUD = 'internal-api-aud-0123456789';
const CONSOLE_AUD = 'console-aud-0123456789abcdef';

const newKey = {
  name: 'made in the console',
  owner: 'design@example.com',
  credits_quota: 100,
  quota_period_days: 30,
  allowed_providers: ['local'],
  rate_limit_rpm: 60,
};

describe('Cloudflare Access JWT as an admin credential (AdminAccessJwt, CF_ACCESS_ADMIN_SCOPES)', () => {
  let jwks: Awaited<ReturnType<typeof startJwksServer>>;
  let signingKey: Awaited<ReturnType<typeof makeKey>>;
  let t: TestGateway;
  let off: TestGateway;

  async function sign(gateway: TestGateway, claims: { email?: string; aud?: string; expiresIn?: number } = {}): Promise<string> {
    const now = Math.floor(gateway.clock.now() / 1000);
    return new SignJWT({ type: 'app', sub: 'user-1', email: claims.email ?? 'ada@example.com' })
      .setProtectedHeader({ alg: 'RS256', kid: signingKey.kid })
      .setIssuer(TEAM)
      .setAudience(claims.aud ?? CONSOLE_AUD)
      .setIssuedAt(now - 60)
      .setExpirationTime(now + (claims.expiresIn ?? 600))
      .sign(signingKey.privateKey);
  }
  const withJwt = (jwt: string, extra: Record<string, string> = {}) => ({ 'Cf-Access-Jwt-Assertion': jwt, ...extra });
  const access = { CF_ACCESS_TEAM_DOMAIN: 'test-team.cloudflareaccess.com', CF_ACCESS_AUD: INTERNAL_AUD };

  beforeAll(async () => {
    jwks = await startJwksServer();
    signingKey = await makeKey('key-2026-11');
    jwks.keys.push(signingKey.jwk);
    const env = { ...access, CF_ACCESS_JWKS_URL: jwks.url };
    t = await startTestGateway({ ...env, CF_ACCESS_ADMIN_SCOPES: 'keys:read, keys:write, audit:read, tokens:write', CF_ACCESS_ADMIN_AUD: CONSOLE_AUD });
    off = await startTestGateway({ ...env, CF_ACCESS_AUD: CONSOLE_AUD });
  });
  afterAll(async () => {
    await t?.close();
    await off?.close();
    await jwks.close();
  });

  it('whoami names the Access user, with exactly the configured scopes and the JWT expiry', async () => {
    const jwt = await sign(t, { expiresIn: 600 });
    const res = await t.api.send('get', '/admin/whoami', { headers: withJwt(jwt) });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      actor: 'access:ada@example.com',
      kind: 'access',
      name: 'ada@example.com',
      scopes: ['keys:read', 'keys:write', 'audit:read', 'tokens:write'],
      expires_at: new Date((decodeJwt(jwt).exp as number) * 1000).toISOString(),
    });
  });

  it('opens the operations of its scopes; the audit log names the Access user as the actor', async () => {
    const jwt = await sign(t, { email: 'grace@example.com' });
    const created = await t.api.send('post', '/admin/keys', { body: newKey, headers: withJwt(jwt, { 'Sec-Fetch-Site': 'same-origin' }) });
    expect(created.status).toBe(201);
    expect((await t.api.send('get', `/admin/keys/${created.body.id}`, { headers: withJwt(jwt) })).status).toBe(200);
    const events = await t.api.admin('get', `/admin/audit-events?target=${created.body.id}`);
    expect(events.body.data).toEqual([expect.objectContaining({ actor: 'access:grace@example.com', action: 'key.created', target: created.body.id })]);
    const byActor = await t.api.send('get', `/admin/audit-events?actor=${encodeURIComponent('access:grace@example.com')}`, { headers: withJwt(jwt) });
    expect([byActor.status, byActor.body.error]).toEqual([200, undefined]);
    expect(byActor.body.data.map((e: { target: string }) => e.target)).toContain(created.body.id);
  });

  it('with tokens:write it mints top-level admin tokens of its own scopes only', async () => {
    const jwt = await sign(t, { email: 'lin@example.com' });
    const minted = await t.api.send('post', '/admin/tokens', { body: { name: 'ci', scopes: ['keys:read'] }, headers: withJwt(jwt) });
    expect([minted.status, minted.body.created_by]).toEqual([201, 'access:lin@example.com']);
    expect((await t.api.send('get', '/admin/keys', { headers: bearer(minted.body.token) })).status).toBe(200);
    const beyond = await t.api.send('post', '/admin/tokens', { body: { name: 'too much', scopes: ['channels:write'] }, headers: withJwt(jwt) });
    expect([beyond.status, beyond.body.error.code]).toEqual([403, 'insufficient_scope']);
  });

  it('403 insufficient_scope outside its scopes', async () => {
    const jwt = await sign(t);
    for (const [method, path] of [
      ['get', '/admin/channels'],
      ['get', '/admin/webhooks'],
      ['get', '/admin/usage'],
    ] as const) {
      const res = await t.api.send(method, path, { headers: withJwt(jwt) });
      expect([path, res.status, res.body.error.code]).toEqual([path, 403, 'insufficient_scope']);
    }
  });

  it.each([
    ['expired', { expiresIn: -1 }, /expired/],
    ['for the internal API (another AUD)', { aud: INTERNAL_AUD }, /audience/],
  ])('401 invalid_access_jwt for a JWT %s', async (_name, claims, message) => {
    const res = await t.api.send('get', '/admin/keys', { headers: withJwt(await sign(t, claims)) });
    expect([res.status, res.body.error.code]).toEqual([401, 'invalid_access_jwt']);
    expect(res.body.error.message).toMatch(message);
  });

  it('401 invalid_access_jwt on a request another site made (Sec-Fetch-Site), against CSRF', async () => {
    for (const site of ['cross-site', 'same-site']) {
      const res = await t.api.send('post', '/admin/keys', { body: newKey, headers: withJwt(await sign(t), { 'Sec-Fetch-Site': site }) });
      expect([site, res.status, res.body.error.code]).toEqual([site, 401, 'invalid_access_jwt']);
    }
  });

  it('an Authorization header decides when sent: the token acts, not the Access JWT', async () => {
    const reader = await createAdminTokenVia(t.api, ['channels:read'], { name: 'typed in' });
    const jwt = await sign(t);
    const who = await t.api.send('get', '/admin/whoami', { headers: { ...withJwt(jwt), ...bearer(reader.token) } });
    expect(who.body).toMatchObject({ actor: reader.id, kind: 'admin_token' });
    expect((await t.api.send('get', '/admin/channels', { headers: { ...withJwt(jwt), ...bearer(reader.token) } })).status).toBe(200);
    const wrong = await t.api.send('get', '/admin/keys', { headers: { ...withJwt(jwt), Authorization: 'Bearer hyadm_wrong' } });
    expect([wrong.status, wrong.body.error.code]).toEqual([401, 'invalid_admin_token']);
  });

  it('without CF_ACCESS_ADMIN_SCOPES a valid Access JWT is no admin credential: 401 invalid_admin_secret', async () => {
    const jwt = await sign(off);
    const res = await off.api.send('get', '/admin/whoami', { headers: withJwt(jwt) });
    expect([res.status, res.body.error.code]).toEqual([401, 'invalid_admin_secret']);
    // The internal API still takes it.
    expect((await off.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).status).toBe(200);
  });

  it('503 access_jwks_unavailable on every admin operation when the signing keys cannot be fetched (each answer checked against its operation)', async () => {
    const down = await startJwksServer();
    down.failing.value = true;
    const gateway = await startTestGateway({ ...access, CF_ACCESS_JWKS_URL: down.url, CF_ACCESS_ADMIN_SCOPES: 'keys:read', CF_ACCESS_ADMIN_AUD: CONSOLE_AUD });
    try {
      const jwt = await sign(gateway);
      const document = loadOpenApiDocument('gateway');
      const adminOperations = operationsAccepting(document, 'AdminAccessJwt');
      expect(adminOperations.length).toBeGreaterThan(30);
      for (const { method, path, operationId } of adminOperations) {
        const res = await gateway.api.send(method, path, { headers: withJwt(jwt, { 'Sec-Fetch-Site': 'same-origin' }) });
        expect([operationId, res.status, res.body.error?.code]).toEqual([operationId, 503, 'access_jwks_unavailable']);
      }
    } finally {
      await gateway.close();
      await down.close();
    }
  });
});
