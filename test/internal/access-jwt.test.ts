import { SignJWT } from 'jose';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { makeKey, operationsAccepting, startJwksServer } from '../helpers/access-jwt';
import { type TestGateway, localRequest, SERVICE_TOKEN, startTestGateway } from '../helpers/test-gateway';

const TEAM = 'https://test-team.cloudflareaccess.com';
const AUD = 'aud-tag-0123456789abcdef';

interface Claims {
  email?: string;
  common_name?: string;
  aud?: string;
  iss?: string;
  /** Seconds from the gateway's now. */
  expiresIn?: number;
}

describe('Cloudflare Access JWT on the internal API (CfAccessJwt)', () => {
  let t: TestGateway;
  let jwks: Awaited<ReturnType<typeof startJwksServer>>;
  let current: Awaited<ReturnType<typeof makeKey>>;

  async function sign(claims: Claims = {}, key = current): Promise<string> {
    const now = Math.floor(t.clock.now() / 1000);
    const payload: Record<string, unknown> = { type: 'app', sub: 'user-1', country: 'NL' };
    if (claims.email !== undefined || claims.common_name === undefined) payload.email = claims.email ?? 'ada@example.com';
    if (claims.common_name !== undefined) payload.common_name = claims.common_name;
    return new SignJWT(payload)
      .setProtectedHeader({ alg: 'RS256', kid: key.kid })
      .setIssuer(claims.iss ?? TEAM)
      .setAudience(claims.aud ?? AUD)
      .setIssuedAt(now - 60)
      .setExpirationTime(now + (claims.expiresIn ?? 600))
      .sign(key.privateKey);
  }

  const withJwt = (jwt: string) => ({ 'Cf-Access-Jwt-Assertion': jwt });

  beforeAll(async () => {
    jwks = await startJwksServer();
    current = await makeKey('key-2026-11');
    jwks.keys.push(current.jwk);
    t = await startTestGateway({ CF_ACCESS_TEAM_DOMAIN: 'test-team.cloudflareaccess.com', CF_ACCESS_AUD: AUD, CF_ACCESS_JWKS_URL: jwks.url });
  });
  afterAll(async () => {
    await t.close();
    await jwks.close();
  });

  it('a valid JWT alone opens every service-token operation; work is attributed to its email', async () => {
    const jwt = await sign({ email: 'ada@example.com' });
    expect((await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).status).toBe(200);
    const generated = await t.internal.send('post', '/api/v1/creative/images/generations', { headers: withJwt(jwt), body: localRequest() });
    expect(generated.status).toBe(200);
    const mine = await t.internal.send('get', `/api/v1/creative/generations?client_id=${encodeURIComponent('ada@example.com')}`, { headers: withJwt(jwt) });
    expect(mine.body.data.map((g: { id: string }) => g.id)).toEqual([generated.body.id]);
    expect((await t.internal.send('get', `/api/v1/creative/generations/${generated.body.id}`, { headers: withJwt(jwt) })).body.client_id).toBe(
      'ada@example.com',
    );
  });

  it('an Access service token JWT (common_name, no email) is attributed to its common_name', async () => {
    const jwt = await sign({ common_name: 'ci-runner.access' });
    const generated = await t.internal.send('post', '/api/v1/creative/images/generations', { headers: withJwt(jwt), body: localRequest() });
    expect(generated.status).toBe(200);
    const row = await t.gateway.database.db.selectFrom('generations').select('client_id').where('id', '=', generated.body.id).executeTakeFirstOrThrow();
    expect(row.client_id).toBe('ci-runner.access');
  });

  it('a browser-style GET /docs with only the JWT gets the page', async () => {
    const res = await t.internal.send('get', '/docs', { headers: { ...withJwt(await sign()), Accept: 'text/html,application/xhtml+xml' } });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('Creative Gateway internal API');
  });

  it('401 invalid_access_jwt, saying why, for an expired, wrong-audience, wrong-issuer, unknown-key, tampered or malformed JWT', async () => {
    const stranger = await makeKey('not-published');
    const valid = await sign();
    const [header, payload, signature] = valid.split('.') as [string, string, string];
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), email: 'mallory@example.com' })).toString(
      'base64url',
    );
    const cases: Array<[string, string, RegExp]> = [
      ['expired', await sign({ expiresIn: -1 }), /expired/],
      ['wrong audience', await sign({ aud: 'another-application' }), /audience/],
      ['wrong issuer', await sign({ iss: 'https://other-team.cloudflareaccess.com' }), /issuer/],
      ['unknown key id', await sign({}, stranger), /key id/],
      ['tampered', `${header}.${forged}.${signature}`, /signature/],
      ['malformed', 'not-a-jwt', /malformed/],
      [
        'HS256 (algorithm confusion)',
        await new SignJWT({ email: 'mallory@example.com' })
          .setProtectedHeader({ alg: 'HS256', kid: current.kid })
          .setIssuer(TEAM)
          .setAudience(AUD)
          .setExpirationTime('10m')
          .sign(new TextEncoder().encode('x'.repeat(32))),
        /RS256/,
      ],
      ['no identity', await sign({ email: '' }), /email or common_name/],
      // Valid forever if accepted (issue #29 §8).
      [
        'no exp',
        await new SignJWT({ email: 'ada@example.com' })
          .setProtectedHeader({ alg: 'RS256', kid: current.kid })
          .setIssuer(TEAM)
          .setAudience(AUD)
          .sign(current.privateKey),
        /no exp claim/,
      ],
    ];
    for (const [name, jwt, reason] of cases) {
      const res = await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) });
      expect([name, res.status, res.body.error.code, res.body.error.type]).toEqual([name, 401, 'invalid_access_jwt', 'authentication_error']);
      expect(res.body.error.message).toMatch(reason);
      expect(res.text).not.toContain(jwt);
    }
  });

  it('the expiry is checked against the gateway clock', async () => {
    const jwt = await sign({ expiresIn: 60 });
    expect((await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).status).toBe(200);
    t.clock.advanceMs(61_000);
    expect((await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).body.error.code).toBe('invalid_access_jwt');
  });

  it('key rotation: an unknown kid refetches the JWKS, at most once per 30 s', async () => {
    const next = await makeKey('key-2027-01');
    jwks.keys.push(next.jwk);
    t.clock.advanceMs(31_000);
    const before = jwks.fetches();
    const jwt = await sign({}, next);
    expect((await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).status).toBe(200);
    expect(jwks.fetches()).toBe(before + 1);

    // Forged kids within the cooldown do not reach Cloudflare.
    const stranger = await makeKey('forged');
    for (let i = 0; i < 5; i += 1) {
      expect((await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(await sign({}, stranger)) })).status).toBe(401);
    }
    expect(jwks.fetches()).toBe(before + 1);
    // The key that was rotated in keeps working from the cache.
    expect((await t.internal.send('get', '/api/v1/creative/models', { headers: withJwt(await sign({}, next)) })).status).toBe(200);
  });

  it('service tokens still work beside it; without either, 401 missing_service_token', async () => {
    expect((await t.internal.service('get', '/api/v1/creative/models')).status).toBe(200);
    const none = await t.internal.send('get', '/api/v1/creative/models');
    expect([none.status, none.body.error.code]).toEqual([401, 'missing_service_token']);
    const wrongPair = await t.internal.send('get', '/api/v1/creative/models', {
      headers: { ...SERVICE_TOKEN, 'CF-Access-Client-Secret': 'wrong-secret-wrong-secret' },
    });
    expect(wrongPair.body.error.code).toBe('invalid_service_token');
  });

  /** A gateway of its own whose JWKS endpoint fails until the test says otherwise. */
  async function withJwksDown(run: (other: TestGateway, down: Awaited<ReturnType<typeof startJwksServer>>) => Promise<void>): Promise<void> {
    const down = await startJwksServer();
    down.failing.value = true;
    const other = await startTestGateway({ CF_ACCESS_TEAM_DOMAIN: TEAM, CF_ACCESS_AUD: AUD, CF_ACCESS_JWKS_URL: down.url });
    try {
      await run(other, down);
    } finally {
      await other.close();
      await down.close();
    }
  }

  it('503 access_jwks_unavailable on every operation a JWT may call while the keys cannot be fetched (each answer checked against its operation)', async () => {
    await withJwksDown(async (other) => {
      const jwt = await sign();
      const document = loadOpenApiDocument('creative');
      const withJwtScheme = operationsAccepting(document, 'CfAccessJwt');
      expect(withJwtScheme.map((operation) => operation.operationId)).toContain('listChannelHealth');
      for (const { method, path, operationId } of withJwtScheme) {
        const res = await other.internal.send(method, path, { headers: withJwt(jwt) });
        expect([operationId, res.status, res.body.error?.code]).toEqual([operationId, 503, 'access_jwks_unavailable']);
      }
    });
  });

  it('503 access_jwks_unavailable when the keys cannot be fetched and none are cached; cached keys outlive a JWKS outage', async () => {
    await withJwksDown(async (other, down) => {
      const jwt = await sign();
      const res = await other.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) });
      expect([res.status, res.body.error.code]).toEqual([503, 'access_jwks_unavailable']);
      down.failing.value = false;
      down.keys.push(current.jwk);
      // Failed fetches are rate-limited as well: within the cooldown the gateway does not ask again.
      expect((await other.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).status).toBe(503);
      expect(down.fetches()).toBe(1);
      other.clock.advanceMs(31_000);
      expect((await other.internal.send('get', '/api/v1/creative/models', { headers: withJwt(jwt) })).status).toBe(200);
      expect(down.fetches()).toBe(2);
      // Past the cache's age the keys are refetched; when that fails, the cached ones stay in use.
      down.failing.value = true;
      other.clock.advanceMs(11 * 60_000);
      const late = await sign({ expiresIn: 3600 }, current);
      expect((await other.internal.send('get', '/api/v1/creative/models', { headers: withJwt(late) })).status).toBe(200);
      expect(down.fetches()).toBe(3);
    });
  });

  it('a gateway without CF_ACCESS_TEAM_DOMAIN / CF_ACCESS_AUD refuses Access JWTs', async () => {
    const plain = await startTestGateway();
    try {
      const res = await plain.internal.send('get', '/docs', { headers: withJwt(await sign()) });
      expect([res.status, res.body.error.code]).toEqual([401, 'invalid_access_jwt']);
      expect(res.body.error.message).toContain('CF_ACCESS_TEAM_DOMAIN');
    } finally {
      await plain.close();
    }
  });
});
