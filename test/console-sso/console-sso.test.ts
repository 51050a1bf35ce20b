import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Response } from 'supertest';
import { loadConfig } from '../../src/config/config';
import { startGateway } from '../../src/server';
import { CLIENT_SECRET, type TestProvider, startProvider } from '../helpers/oidc-provider';
import { ApiClient, type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * Console single sign-on over HTTP against a real OpenID Provider (oidc-provider, in a process of its
 * own: test/helpers/oidc-test-provider.mjs). The test plays the browser: it follows the redirects
 * between the gateway and the provider with each side's cookies.
 */

const BASE = 'https://console.example.test';

function issuersJson(providers: { id: string; provider: TestProvider; clientId?: string }[]): string {
  return JSON.stringify(
    providers.map(({ id, provider, clientId }) => ({
      id,
      name: `${id} SSO`,
      issuer: provider.issuer,
      client_id: clientId ?? 'gateway',
      ...(clientId === 'gateway-public' ? {} : { client_secret: CLIENT_SECRET }),
      scopes: ['openid', 'email', 'groups'],
      scope_map: { 'gateway-admins': ['keys:read', 'keys:write', 'audit:read'], support: ['keys:read'] },
    })),
  );
}

interface Redirected {
  /** The callback's query string, as the provider sent the browser back with it. */
  query: string;
  /** The gateway's sign-in cookie's value. */
  signInCookie: string;
}

function setCookiesOf(res: Response): string[] {
  const header = res.headers['set-cookie'] as unknown;
  return Array.isArray(header) ? (header as string[]) : typeof header === 'string' ? [header] : [];
}

function cookieFrom(res: Response, name: string): string | undefined {
  const found = setCookiesOf(res).find((cookie) => cookie.startsWith(`${name}=`));
  return found?.slice(name.length + 1).split(';')[0];
}

/** The browser's part: start at the gateway, sign in at the provider, stop where it sends the browser back. */
async function signInAtProvider(api: ApiClient, issuerId: string, tamper: (authorizationUrl: URL) => void = () => undefined): Promise<Redirected> {
  const start = await api.send('get', `/console/sso/${issuerId}/sign-in`);
  expect(start.status).toBe(302);
  const signInCookie = cookieFrom(start, '__Host-cgw_sso');
  expect(setCookiesOf(start)[0]).toMatch(/; HttpOnly; Secure; SameSite=Lax$/);
  let url = new URL(start.headers.location as string);
  expect(url.searchParams.get('code_challenge_method')).toBe('S256');
  tamper(url);
  const jar = new Map<string, string>();
  for (let hops = 0; hops < 10; hops += 1) {
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: [...jar].map(([n, v]) => `${n}=${v}`).join('; ') } });
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const at = pair!.indexOf('=');
      jar.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    const location = res.headers.get('location');
    if (location === null) throw new Error(`the provider answered ${res.status} at ${url.href}: ${(await res.text()).slice(0, 300)}`);
    url = new URL(location, url);
    if (url.origin === BASE) return { query: url.search, signInCookie: signInCookie! };
  }
  throw new Error('too many redirects at the provider');
}

const callback = (api: ApiClient, redirected: Redirected, cookie = redirected.signInCookie) =>
  api.send('get', `/console/sso/callback${redirected.query}`, { headers: { Cookie: `__Host-cgw_sso=${cookie}` } });

interface Session {
  cookie: string;
  csrf: string;
}

async function signIn(api: ApiClient, issuerId = 'corp'): Promise<Session> {
  const res = await callback(api, await signInAtProvider(api, issuerId));
  expect(res.status).toBe(303);
  expect(res.headers.location).toBe('/console');
  const cookies = setCookiesOf(res);
  expect(cookies.find((c) => c.startsWith('__Host-cgw_session='))).toMatch(/; HttpOnly; Secure; SameSite=Strict$/);
  expect(cookies.find((c) => c.startsWith('__Host-cgw_csrf='))).toMatch(/; Secure; SameSite=Strict$/);
  expect(cookies.find((c) => c.startsWith('__Host-cgw_csrf='))).not.toMatch(/HttpOnly/);
  return { cookie: `__Host-cgw_session=${cookieFrom(res, '__Host-cgw_session')}`, csrf: cookieFrom(res, '__Host-cgw_csrf')! };
}

const asSession = (session: Session, extra: Record<string, string> = {}) => ({ headers: { Cookie: session.cookie, ...extra } });
const withCsrf = (session: Session) => asSession(session, { 'X-CSRF-Token': session.csrf });
const newKey = { name: 'sso key', owner: 'ops@example.com', credits_quota: 10, quota_period_days: 30, allowed_providers: ['local'] };

describe('console single sign-on (OpenID Connect)', () => {
  let op: TestProvider;
  let other: TestProvider;
  let gw: TestGateway;

  beforeAll(async () => {
    [op, other] = await Promise.all([startProvider(), startProvider()]);
    gw = await startTestGateway({
      PUBLIC_BASE_URL: BASE,
      CONSOLE_OIDC_ISSUERS: issuersJson([
        { id: 'corp', provider: op },
        { id: 'partners', provider: other, clientId: 'gateway-public' },
      ]),
    });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([op?.stop(), other?.stop()]);
  });
  beforeEach(() => op.setUser({ sub: 'ada', email: 'ada@example.com', groups: ['gateway-admins'] }));
  // Tests that move the gateway's clock put it back: the provider's ID tokens are checked against it.
  afterEach(() => gw.clock.advanceMs(Date.now() - gw.clock.now()));

  it('lists the configured issuers for the sign-in page', async () => {
    const res = await gw.api.send('get', '/console/sso/issuers');
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([
      { id: 'corp', name: 'corp SSO', sign_in_path: '/console/sso/corp/sign-in' },
      { id: 'partners', name: 'partners SSO', sign_in_path: '/console/sso/partners/sign-in' },
    ]);
    expect((await gw.api.send('get', '/console/sso/issuers?unknown=1')).status).toBe(400);
  });

  it('signs a person in: the session acts with the scopes their groups map to, audited under their name', async () => {
    const session = await signIn(gw.api);
    const whoami = await gw.api.send('get', '/admin/whoami', asSession(session));
    expect(whoami.status).toBe(200);
    expect(whoami.body).toMatchObject({ kind: 'console_session', actor: 'sso:corp:ada:ada@example.com', name: 'ada@example.com' });
    expect(whoami.body.scopes).toEqual(['keys:read', 'keys:write', 'audit:read']);
    expect((await gw.api.send('get', '/admin/keys', asSession(session))).status).toBe(200);
    expect((await gw.api.send('get', '/admin/channels', asSession(session))).body.error.code).toBe('insufficient_scope');

    const created = await gw.api.send('post', '/admin/keys', { ...withCsrf(session), body: newKey });
    expect(created.status).toBe(201);
    const events = await gw.api.send('get', `/admin/audit-events?target=${created.body.id}`, asSession(session));
    expect(events.body.data[0]).toMatchObject({ action: 'key.created', actor: 'sso:corp:ada:ada@example.com' });
    const signIns = await gw.api.admin('get', '/admin/audit-events?action=console_session.created');
    expect(signIns.body.data[0]).toMatchObject({ actor: 'sso:corp:ada:ada@example.com' });
    expect(signIns.body.data[0].after).toMatchObject({ issuer: op.issuer, subject: 'ada', email: 'ada@example.com' });
  });

  it('refuses a state-changing call without the CSRF token, or from another site, and lets an Authorization header decide', async () => {
    const session = await signIn(gw.api);
    const missing = await gw.api.send('post', '/admin/keys', { ...asSession(session), body: newKey });
    expect(missing.status).toBe(403);
    expect(missing.body.error.code).toBe('csrf_token_invalid');
    const wrong = await gw.api.send('post', '/admin/keys', { ...asSession(session, { 'X-CSRF-Token': 'x'.repeat(43) }), body: newKey });
    expect(wrong.body.error.code).toBe('csrf_token_invalid');
    const crossSite = await gw.api.send('get', '/admin/keys', asSession(session, { 'Sec-Fetch-Site': 'cross-site' }));
    expect(crossSite.status).toBe(401);
    expect(crossSite.body.error.code).toBe('invalid_console_session');
    const withToken = await gw.api.send('get', '/admin/whoami', asSession(session, { Authorization: 'Bearer hyadm_wrong' }));
    expect(withToken.status).toBe(401);
    expect(withToken.body.error.code).toBe('invalid_admin_token');
  });

  it('refuses a callback whose state it did not issue, or that another browser started', async () => {
    const redirected = await signInAtProvider(gw.api, 'corp');
    const otherBrowser = await callback(gw.api, redirected, 'someone-elses-state');
    expect(otherBrowser.status).toBe(400);
    expect(otherBrowser.body.error.message).toMatch(/this browser did not start this sign-in/);

    const next = await signInAtProvider(gw.api, 'corp');
    const query = new URLSearchParams(next.query);
    query.set('state', 'a-state-the-gateway-never-issued');
    const forged = await gw.api.send('get', `/console/sso/callback?${query}`, { headers: { Cookie: `__Host-cgw_sso=${next.signInCookie}` } });
    expect(forged.status).toBe(400);
    expect(forged.body.error).toMatchObject({ code: 'sso_sign_in_failed', message: expect.stringMatching(/unknown, used already or expired/) });
    expect((await gw.api.send('get', '/console/sso/callback', { headers: {} })).body.error.code).toBe('sso_sign_in_failed');
  });

  it('refuses a replayed callback (its code and state used already)', async () => {
    const redirected = await signInAtProvider(gw.api, 'corp');
    expect((await callback(gw.api, redirected)).status).toBe(303);
    const replay = await callback(gw.api, redirected);
    expect(replay.status).toBe(400);
    expect(replay.body.error.message).toMatch(/used already/);
  });

  it("refuses an ID token whose nonce is not the sign-in's", async () => {
    const redirected = await signInAtProvider(gw.api, 'corp', (url) => url.searchParams.set('nonce', 'a-nonce-the-gateway-never-issued'));
    const res = await callback(gw.api, redirected);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'sso_sign_in_failed', message: expect.stringMatching(/nonce/) });
  });

  it('refuses an expired ID token', async () => {
    const redirected = await signInAtProvider(gw.api, 'corp');
    // The provider's ID tokens live 60 s; the gateway's clock is 5 minutes on when the code comes back.
    gw.clock.advanceMs(5 * 60_000);
    const res = await callback(gw.api, redirected);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/ID token has expired/);
  });

  it('picks up a signing key the issuer rotated to', async () => {
    await signIn(gw.api);
    await op.rotateKey();
    const session = await signIn(gw.api);
    expect((await gw.api.send('get', '/admin/whoami', asSession(session))).status).toBe(200);
  });

  it('refuses a person whose groups map to no scope, and audits it', async () => {
    await op.setUser({ sub: 'eve', email: 'eve@example.com', groups: ['marketing'] });
    const res = await callback(gw.api, await signInAtProvider(gw.api, 'corp'));
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('sso_no_access');
    expect(setCookiesOf(res).some((c) => c.startsWith('__Host-cgw_session='))).toBe(false);
    const refused = await gw.api.admin('get', '/admin/audit-events?action=console_session.refused');
    expect(refused.body.data[0]).toMatchObject({ actor: 'sso:corp:eve:eve@example.com', target: 'corp', after: { groups: ['marketing'], scopes: [] } });
  });

  it('narrows the next sign-in when a group is removed at the issuer', async () => {
    const before = await signIn(gw.api);
    expect((await gw.api.send('post', '/admin/keys', { ...withCsrf(before), body: newKey })).status).toBe(201);
    await op.setUser({ sub: 'ada', email: 'ada@example.com', groups: ['support'] });
    const after = await signIn(gw.api);
    expect((await gw.api.send('get', '/admin/whoami', asSession(after))).body.scopes).toEqual(['keys:read']);
    const refused = await gw.api.send('post', '/admin/keys', { ...withCsrf(after), body: newKey });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'insufficient_scope', scope: 'keys:write' });
  });

  it("signs out: the session is revoked and the issuer's end-session URL answered", async () => {
    const session = await signIn(gw.api);
    expect((await gw.api.send('post', '/console/sso/sign-out', asSession(session))).body.error.code).toBe('csrf_token_invalid');
    expect((await gw.api.send('post', '/console/sso/sign-out?unknown=1', withCsrf(session))).status).toBe(400);
    const res = await gw.api.send('post', '/console/sso/sign-out', withCsrf(session));
    expect(res.status).toBe(200);
    const end = new URL(res.body.end_session_url as string);
    expect(`${end.origin}${end.pathname}`).toBe(`${op.issuer}/session/end`);
    expect(end.searchParams.get('post_logout_redirect_uri')).toBe(`${BASE}/console`);
    expect(end.searchParams.get('id_token_hint')).toMatch(/^ey/);
    expect(setCookiesOf(res)).toEqual(expect.arrayContaining([expect.stringMatching(/^__Host-cgw_session=; Path=\/; Max-Age=0/)]));
    const after = await gw.api.send('get', '/admin/whoami', asSession(session));
    expect(after.status).toBe(401);
    expect(after.body.error).toMatchObject({ code: 'invalid_console_session', message: expect.stringMatching(/signed out/) });
    const revoked = await gw.api.admin('get', '/admin/audit-events?action=console_session.revoked');
    expect(revoked.body.data[0].actor).toBe('sso:corp:ada:ada@example.com');
    expect((await gw.api.send('post', '/console/sso/sign-out', {})).status).toBe(401);
  });

  it('ends a session unused past its idle limit, and any session past its absolute lifetime', async () => {
    const idle = await signIn(gw.api);
    gw.clock.advanceMs(61 * 60_000);
    const res = await gw.api.send('get', '/admin/whoami', asSession(idle));
    expect(res.body.error).toMatchObject({ code: 'invalid_console_session', message: expect.stringMatching(/unused/) });
    gw.clock.advanceMs(Date.now() - gw.clock.now());

    const used = await signIn(gw.api);
    // Used every 50 minutes (within the idle limit) for 700 minutes, then once past the 12 hours.
    for (let use = 0; use < 14; use += 1) {
      gw.clock.advanceMs(50 * 60_000);
      expect((await gw.api.send('get', '/admin/whoami', asSession(used))).status).toBe(200);
    }
    gw.clock.advanceMs(50 * 60_000);
    const late = await gw.api.send('get', '/admin/whoami', asSession(used));
    expect(late.body.error.message).toMatch(/maximum lifetime/);
  });

  it('signs in with a second issuer as a public client (PKCE only), and answers 503 when the issuer is unreachable', async () => {
    await other.setUser({ sub: 'bob', email: 'bob@partner.example', groups: ['support'] });
    const session = await signIn(gw.api, 'partners');
    expect((await gw.api.send('get', '/admin/whoami', asSession(session))).body.actor).toBe('sso:partners:bob:bob@partner.example');

    const redirected = await signInAtProvider(gw.api, 'partners');
    await other.stop();
    const res = await callback(gw.api, redirected);
    expect(res.body.error).toMatchObject({ code: 'sso_issuer_unavailable' });
    expect(res.status).toBe(503);
  });

  it('answers 404 for an issuer not configured', async () => {
    expect((await gw.api.send('get', '/console/sso/nobody/sign-in')).body.error.code).toBe('not_found');
    expect((await gw.api.send('get', '/console/sso/NOT_AN_ID/sign-in')).status).toBe(400);
  });

  it('a session signed out on one replica is refused by another on the same database', async () => {
    const replicaConfig = loadConfig(
      {
        NODE_ENV: 'test',
        PORT: '0',
        INTERNAL_PORT: '0',
        HOST: '127.0.0.1',
        DATABASE_URL: gw.databaseUrl,
        ADMIN_SECRET: 'test-admin-secret-0123456789',
        VALIDATE_RESPONSES: 'true',
        LOG_LEVEL: 'silent',
        PUBLIC_BASE_URL: BASE,
        CONSOLE_OIDC_ISSUERS: issuersJson([{ id: 'corp', provider: op }]),
      },
      () => undefined,
    );
    const replica = await startGateway(replicaConfig, { clock: gw.clock });
    try {
      const other = new ApiClient(replica.url);
      const session = await signIn(gw.api);
      expect((await other.send('get', '/admin/whoami', asSession(session))).status).toBe(200);
      expect((await gw.api.send('post', '/console/sso/sign-out', withCsrf(session))).status).toBe(200);
      const refused = await other.send('get', '/admin/whoami', asSession(session));
      expect(refused.status).toBe(401);
      expect(refused.body.error.code).toBe('invalid_console_session');
    } finally {
      await replica.close();
    }
  });
});

describe('console single sign-on configuration', () => {
  // A SQLite path in a directory of its own: the secrets a start generates go there, not into the working directory.
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-sso-config-'));
  const base = {
    NODE_ENV: 'test',
    PORT: '0',
    INTERNAL_PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: path.join(scratch, 'gateway.db'),
    ADMIN_SECRET: 'test-admin-secret-0123456789',
  };
  afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));
  const entry = { id: 'corp', issuer: 'https://login.example.com', client_id: 'gateway', scope_map: { admins: ['keys:read'] } };

  it('stops startup on a scope_map naming an unknown scope, in one line', () => {
    expect(() => loadConfig({ ...base, CONSOLE_OIDC_ISSUERS: JSON.stringify([{ ...entry, scope_map: { admins: ['keys:raed'] } }]) }, () => undefined)).toThrow(
      'CONSOLE_OIDC_ISSUERS "corp": scope_map["admins"] names "keys:raed", not an admin scope',
    );
  });

  it('refuses an http issuer other than a loopback one outside production', () => {
    expect(() => loadConfig({ ...base, CONSOLE_OIDC_ISSUERS: JSON.stringify([{ ...entry, issuer: 'http://login.example.com' }]) }, () => undefined)).toThrow(
      /must be an https URL/,
    );
  });

  it('stops startup when discovery fails, in one line', async () => {
    const config = loadConfig({ ...base, CONSOLE_OIDC_ISSUERS: JSON.stringify([{ ...entry, issuer: 'http://127.0.0.1:9/' }]) }, () => undefined);
    await expect(startGateway(config, { logDestination: { write: () => undefined } })).rejects.toThrow(
      /^CONSOLE_OIDC_ISSUERS "corp": discovery of http:\/\/127\.0\.0\.1:9\/ failed: /,
    );
  });
});
