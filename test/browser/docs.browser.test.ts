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

  /** Loads a page with every non-loopback request blocked; returns what failed or was blocked. */
  async function render(url: string, headers: Record<string, string>, expectedText: string): Promise<{ failed: string[]; blocked: string[] }> {
    const context = await browser.newContext({ extraHTTPHeaders: headers });
    const page = await context.newPage();
    const blocked: string[] = [];
    const failed: string[] = [];
    await page.route('**/*', (route) => {
      const host = new URL(route.request().url()).hostname;
      if (['127.0.0.1', 'localhost', '[::1]'].includes(host) || route.request().url().startsWith('data:')) return route.continue();
      blocked.push(route.request().url());
      return route.abort();
    });
    page.on('requestfailed', (request) => failed.push(`${request.url()} ${request.failure()?.errorText ?? ''}`));
    page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.url()} ${response.status()}`);
    });
    await page.goto(url, { waitUntil: 'load' });
    await page.getByText(expectedText, { exact: false }).first().waitFor({ timeout: 30_000 });
    await page.waitForLoadState('networkidle');
    await context.close();
    return { failed, blocked };
  }

  it('the public gateway reference (getApiReference) renders its operations with no failed request', async () => {
    // Tags are alphabetical (spectral:oas), so the first one shown open is Admin keys.
    const result = await render(`${t.gateway.url}/docs`, {}, 'Create an API key');
    expect(result).toEqual({ failed: [], blocked: [] });
  }, 60_000);

  it('the internal reference (getCreativeApiReference) renders behind the service token', async () => {
    const result = await render(`${t.gateway.internalUrl}/docs`, SERVICE_TOKEN, 'Aggregated usage');
    expect(result).toEqual({ failed: [], blocked: [] });
  }, 60_000);
});
