import fs from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
// CI installs Debian's chromium (.ci/run), so there a missing browser is a failure, not a skip.
if (!available && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run should have installed chromium`);
if (!available) console.warn(`Skipping the /docs browser test: no ${CHROMIUM} (apt-get install chromium)`);
const describeWithBrowser = available ? describe : describe.skip;

describeWithBrowser('/docs in headless Chromium, offline', () => {
  let t: TestGateway;
  let browser: Browser;
  beforeAll(async () => {
    t = await startTestGateway();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

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
  async function render(url: string, headers: Record<string, string>, expectedText: string): Promise<Rendered> {
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

  // Tags are alphabetical (spectral:oas), so the first one shown open is Admin channels.
  const clean: Rendered = { offMachine: [], failed: [], console: [], hostedFeatures: [] };

  it('the public gateway reference (getApiReference) renders its operations, asks nothing of any other host, and offers no hosted feature', async () => {
    expect(await render(`${t.gateway.url}/docs`, {}, 'Add an upstream account (channel)')).toEqual(clean);
  }, 60_000);

  it('the internal reference (getCreativeApiReference) renders behind the service token, with no validation warning', async () => {
    expect(await render(`${t.gateway.internalUrl}/docs`, SERVICE_TOKEN, 'Aggregated usage')).toEqual(clean);
  }, 60_000);
});
