import fs from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** What a page did that it must not: requests elsewhere, CSP refusals, console errors and warnings, page errors, failed requests. */
export interface Misconduct {
  offOrigin: string[];
  cspViolations: string[];
  consoleErrors: string[];
  failedRequests: string[];
}

export const clean: Misconduct = { offOrigin: [], cspViolations: [], consoleErrors: [], failedRequests: [] };

export interface ConsoleTab {
  page: Page;
  context: BrowserContext;
  misconduct: Misconduct;
  /** Everything recorded so far, CSP violations included (read from the page). */
  check(): Promise<Misconduct>;
}

/**
 * A tab on the console that records every request to another origin, CSP violation, console error or
 * warning, uncaught page error, and request that failed or was answered with an error status. None is
 * expected, whatever the page: a test ends with `expect(await tab.check()).toEqual(clean)`.
 */
export async function openConsole(browser: Browser, origin: string): Promise<ConsoleTab> {
  const context = await browser.newContext({ acceptDownloads: true, locale: 'en-US' });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const page = await context.newPage();
  const misconduct: Misconduct = { offOrigin: [], cspViolations: [], consoleErrors: [], failedRequests: [] };
  // Runs before the page's own scripts (a string: this project compiles without the DOM types).
  await page.addInitScript(`
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (event) => window.cspViolations.push(event.blockedURI + ' (' + event.effectiveDirective + ')'));
  `);
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue();
    misconduct.offOrigin.push(url);
    return route.abort();
  });
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') misconduct.consoleErrors.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => misconduct.consoleErrors.push(`pageerror: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) misconduct.failedRequests.push(`${response.request().method()} ${response.url()} ${response.status()}`);
  });
  page.on('requestfailed', (request) => {
    // Requests to another origin are aborted above and recorded as such.
    if (!request.url().startsWith(origin)) return;
    misconduct.failedRequests.push(`${request.method()} ${request.url()} ${request.failure()?.errorText ?? 'failed'}`);
  });
  page.on('dialog', (dialog) => void dialog.accept());
  return {
    page,
    context,
    misconduct,
    async check() {
      misconduct.cspViolations = (await page.evaluate('window.cspViolations')) as string[];
      return misconduct;
    },
  };
}

/** Serious or critical axe-core violations on the page as it is (axe evaluated in the page, not injected as a script the CSP would refuse). */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const results = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`)) as {
    violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>;
  };
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** The roles of controls a person operates: two of them with one name cannot be told apart by ear or by a test. */
const CONTROL_ROLES = new Set([
  'button',
  'checkbox',
  'combobox',
  'listbox',
  'radio',
  'searchbox',
  'slider',
  'spinbutton',
  'switch',
  'textbox',
  'menuitem',
  'tab',
]);

interface AxNode {
  ignored: boolean;
  role?: { value?: string };
  name?: { value?: string };
}

/**
 * Accessible names that more than one control on the page has (axe-core has no rule for this), as
 * Chromium computes them (its accessibility tree over CDP): `"Owner" ×2 (textbox, textbox)`.
 * A control without a name is axe's to report.
 */
export async function duplicateControlNames(page: Page): Promise<string[]> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { nodes } = (await cdp.send('Accessibility.getFullAXTree')) as { nodes: AxNode[] };
    const byName = new Map<string, string[]>();
    for (const node of nodes) {
      const role = node.role?.value ?? '';
      const name = node.name?.value?.trim() ?? '';
      if (node.ignored || !CONTROL_ROLES.has(role) || name === '') continue;
      byName.set(name, [...(byName.get(name) ?? []), role]);
    }
    return [...byName.entries()].filter(([, roles]) => roles.length > 1).map(([name, roles]) => `"${name}" ×${roles.length} (${roles.join(', ')})`);
  } finally {
    await cdp.detach();
  }
}

/** What is wrong with the page as it is, for assistive technology: axe-core's serious violations, then controls that share a name. */
export async function pageProblems(page: Page): Promise<string[]> {
  return [...(await accessibilityViolations(page)), ...(await duplicateControlNames(page)).map((duplicate) => `duplicate name: ${duplicate}`)];
}
