import fs from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { describeSkippedBecause } from '../helpers/skip-reasons';
import { CLIENT_SECRET, type TestProvider, startProvider } from '../helpers/oidc-provider';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run should have installed chromium`);
const describeWithBrowser = available ? describe : describeSkippedBecause(`no ${CHROMIUM} (apt-get install chromium, or CHROMIUM_PATH)`);

/**
 * The console's single sign-on in Chromium, through a real OpenID Provider (oidc-provider, whose
 * sign-in signs the test's user in at once): the sign-in page's button, the issuer and back, the
 * session's cookies acting on the admin API (a state-changing call with the console's CSRF header),
 * and sign-out at the gateway and then at the issuer.
 */
describeWithBrowser('the console signs in with single sign-on in Chromium', () => {
  let op: TestProvider;
  let t: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    op = await startProvider();
    t = await startTestGateway({
      CONSOLE_OIDC_ISSUERS: JSON.stringify([
        {
          id: 'corp',
          name: 'Corp SSO',
          issuer: op.issuer,
          client_id: 'gateway',
          client_secret: CLIENT_SECRET,
          scopes: ['openid', 'email', 'groups'],
          scope_map: { 'gateway-admins': ['keys:read', 'keys:write'] },
        },
      ]),
    });
    await op.redirectTo(t.gateway.url);
    await op.setUser({ sub: 'ada', email: 'ada@example.com', groups: ['gateway-admins'] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await op?.stop();
  });

  it('signs in through the issuer, acts with the session, and signs out at both', async () => {
    const context = await browser.newContext({ locale: 'en-US' });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`${message.text()} ${message.location().url}`);
    });
    try {
      await page.goto(`${t.gateway.url}/console`);
      await page.getByRole('link', { name: 'Sign in with Corp SSO' }).click();
      await page.getByRole('navigation', { name: 'Console' }).waitFor();
      await page.getByText('Signed in as ada@example.com').waitFor();

      const cookies = await context.cookies(t.gateway.url);
      const session = cookies.find((cookie) => cookie.name === '__Host-cgw_session');
      expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict', path: '/' });
      expect(cookies.find((cookie) => cookie.name === '__Host-cgw_csrf')).toMatchObject({ httpOnly: false, sameSite: 'Strict' });

      // The console's own client: the cookie goes by itself, the CSRF header from the console's api.ts.
      // A string: this project compiles without the DOM types.
      const created = await page.evaluate(`(async () => {
        const token = /__Host-cgw_csrf=([^;]+)/.exec(document.cookie)?.[1] ?? '';
        const body = JSON.stringify({ name: 'from sso', owner: 'ada@example.com', credits_quota: 5, quota_period_days: 30, allowed_providers: ['local'] });
        const headers = { 'Content-Type': 'application/json' };
        const withToken = await fetch('/admin/keys', { method: 'POST', headers: { ...headers, 'X-CSRF-Token': token }, body });
        const without = await fetch('/admin/keys', { method: 'POST', headers, body });
        return [withToken.status, without.status];
      })()`);
      expect(created).toEqual([201, 403]);
      const events = await t.api.admin('get', '/admin/audit-events?action=key.created');
      expect(events.body.data[0].actor).toBe('sso:corp:ada:ada@example.com');

      await page.getByRole('button', { name: 'Sign out' }).click();
      // The issuer asks to confirm its own sign-out, then sends the browser back to the console.
      await page.waitForURL((url) => url.href.startsWith(op.issuer));
      await page.getByRole('button', { name: /yes/i }).click();
      await page.getByRole('link', { name: 'Sign in with Corp SSO' }).waitFor();
      expect(page.url()).toBe(`${t.gateway.url}/console`);
      const after = await t.api.send('get', '/admin/whoami', { headers: { Cookie: `__Host-cgw_session=${session!.value}` } });
      expect(after.body.error.code).toBe('invalid_console_session');
      // The console's pages logged nothing but the refusal asked for above (the issuer's own pages load
      // what they load: its fonts, its favicon).
      expect(errors.filter((error) => error.includes(t.gateway.url))).toEqual([
        `Failed to load resource: the server responded with a status of 403 (Forbidden) ${t.gateway.url}/admin/keys`,
      ]);
    } finally {
      await context.close();
    }
  });
});
