import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { type Browser, chromium } from 'playwright-core';
import { SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { describeSkippedBecause } from '../helpers/skip-reasons';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
// CI installs Debian's chromium (.ci/run), so there a missing browser is a failure, not a skip.
if (!available && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run should have installed chromium`);
if (!available) console.warn(`Skipping the /docs browser test: no ${CHROMIUM} (apt-get install chromium)`);
const describeWithBrowser = available ? describe : describeSkippedBecause(`no ${CHROMIUM} (apt-get install chromium, or CHROMIUM_PATH)`);

const LOOPBACK = ['127.0.0.1', 'localhost', '[::1]'];
const offLoopback = (url: string) => !url.startsWith('data:') && !LOOPBACK.includes(new URL(url).hostname);

interface Rendered {
  /** Requests to anything but this machine: sent (and aborted here), or refused by the page's CSP. */
  offMachine: string[];
  /** Requests that failed or answered >= 400. */
  failed: string[];
  /** Console errors and warnings (CSP refusals, Scalar's document validation warnings, 404s). */
  console: string[];
  /** Scalar features that need scalar.com: the "Ask AI" agent, the developer toolbar (Share, Deploy). */
  hostedFeatures: string[];
}

/** Loads a page, recording every request it attempts, including those its CSP refuses before they leave. */
async function render(browser: Browser, url: string, headers: Record<string, string>, expectedText: string): Promise<Rendered> {
  const context = await browser.newContext({ extraHTTPHeaders: headers });
  const page = await context.newPage();
  const rendered: Rendered = { offMachine: [], failed: [], console: [], hostedFeatures: [] };
  // Runs in the page before its own scripts (a string: this project compiles without the DOM types).
  await page.addInitScript(`
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (event) => window.cspViolations.push(event.blockedURI + ' (' + event.effectiveDirective + ')'));
  `);
  await page.route('**/*', (route) => {
    if (!offLoopback(route.request().url())) return route.continue();
    rendered.offMachine.push(route.request().url());
    return route.abort();
  });
  page.on('requestfailed', (request) => {
    if (!offLoopback(request.url())) rendered.failed.push(`${request.url()} ${request.failure()?.errorText ?? ''}`);
  });
  page.on('response', (response) => {
    if (response.status() >= 400) rendered.failed.push(`${response.url()} ${response.status()}`);
  });
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') rendered.console.push(`${message.type()}: ${message.text()}`);
  });
  await page.goto(url, { waitUntil: 'load' });
  await page.getByText(expectedText, { exact: false }).first().waitFor({ timeout: 30_000 });
  await page.waitForLoadState('networkidle');
  rendered.offMachine.push(...((await page.evaluate('window.cspViolations')) as string[]));
  for (const name of ['Ask AI', 'Developer Tools', 'Share', 'Deploy']) {
    if ((await page.getByRole('button', { name }).count()) + (await page.getByRole('link', { name }).count()) > 0) rendered.hostedFeatures.push(name);
  }
  if ((await page.locator('.agent-button-container, .ask-agent-scalar-input').count()) > 0) rendered.hostedFeatures.push('agent panel');
  await context.close();
  return rendered;
}

const clean: Rendered = { offMachine: [], failed: [], console: [], hostedFeatures: [] };
const BROWSER_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

describeWithBrowser('/docs in headless Chromium, offline', () => {
  let t: TestGateway;
  let browser: Browser;
  beforeAll(async () => {
    t = await startTestGateway();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: BROWSER_ARGS });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  // Tags are alphabetical (spectral:oas), so the first one shown open is Admin channels.

  it('the public gateway reference (getApiReference) renders its operations, asks nothing of any other host, and offers no hosted feature', async () => {
    expect(await render(browser, `${t.gateway.url}/docs`, {}, 'Add an upstream account (channel)')).toEqual(clean);
  }, 60_000);

  it('the internal reference (getCreativeApiReference) renders behind the service token, with no validation warning', async () => {
    expect(await render(browser, `${t.gateway.internalUrl}/docs`, SERVICE_TOKEN, 'Aggregated usage')).toEqual(clean);
  }, 60_000);
});

describeWithBrowser('/docs of the internal listener in headless Chromium, through Cloudflare Access (JWT only), offline', () => {
  const TEAM = 'https://docs-team.cloudflareaccess.com';
  const AUD = 'aud-docs-0123456789abcdef';
  let t: TestGateway;
  let browser: Browser;
  let jwks: http.Server;
  let privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

  /** What Access would add to each request it forwards to the origin: its JWT for this user. */
  async function accessJwt(audience = AUD): Promise<string> {
    const now = Math.floor(t.clock.now() / 1000);
    return new SignJWT({ type: 'app', email: 'ada@example.com', sub: 'user-1' })
      .setProtectedHeader({ alg: 'RS256', kid: 'docs-key' })
      .setIssuer(TEAM)
      .setAudience(audience)
      .setIssuedAt(now - 60)
      .setExpirationTime(now + 600)
      .sign(privateKey);
  }

  beforeAll(async () => {
    // The team's keys, served on this machine as https://<team>/cdn-cgi/access/certs would serve them.
    const pair = await generateKeyPair('RS256', { extractable: true });
    privateKey = pair.privateKey;
    const keys = [{ ...(await exportJWK(pair.publicKey)), kid: 'docs-key', alg: 'RS256', use: 'sig' }];
    jwks = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys })));
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/cdn-cgi/access/certs`;
    t = await startTestGateway({ CF_ACCESS_TEAM_DOMAIN: 'docs-team.cloudflareaccess.com', CF_ACCESS_AUD: AUD, CF_ACCESS_JWKS_URL: jwksUrl });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: BROWSER_ARGS });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await new Promise((resolve) => jwks?.close(resolve));
  });

  it('renders the creative reference with only Cf-Access-Jwt-Assertion on every request (no service token), asking nothing of any other host', async () => {
    expect(await render(browser, `${t.gateway.internalUrl}/docs`, { 'Cf-Access-Jwt-Assertion': await accessJwt() }, 'Aggregated usage')).toEqual(clean);
  }, 60_000);

  it('the same page without the JWT, or with one for another application, is refused', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.route('**/*', (route) => (new URL(route.request().url()).hostname === '127.0.0.1' ? route.continue() : route.abort()));
    const bare = await page.goto(`${t.gateway.internalUrl}/docs`);
    expect(bare?.status()).toBe(401);
    await page.setExtraHTTPHeaders({ 'Cf-Access-Jwt-Assertion': await accessJwt('another-application') });
    const foreign = await page.goto(`${t.gateway.internalUrl}/docs`);
    expect([foreign?.status(), JSON.parse((await foreign?.text()) ?? '{}').error?.code]).toEqual([401, 'invalid_access_jwt']);
    await context.close();
  }, 60_000);
});
