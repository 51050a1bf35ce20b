import fs from 'node:fs';
import path from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';
import { SignJWT } from 'jose';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { makeKey, startJwksServer } from '../helpers/access-jwt';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { rangeOf } from '../../console/src/usage-series';
import { transportFacts } from '../../src/cli/commands/channels-transports';
import { FORMATS } from '../../src/providers/formats';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { type ConsoleTab, clean, openConsole, pageProblems } from './console-tab';
import { describeSkippedBecause } from '../helpers/skip-reasons';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
// CI installs Debian's chromium (.ci/run), so there a missing browser is a failure, not a skip.
if (!available && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run should have installed chromium`);
if (!available) console.warn(`Skipping the console browser test: no ${CHROMIUM} (apt-get install chromium)`);
const describeWithBrowser = available ? describe : describeSkippedBecause(`no ${CHROMIUM} (apt-get install chromium, or CHROMIUM_PATH)`);

const BROWSER_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
/** Screenshots of each page, kept as test artefacts (git-ignored). */
const ARTIFACTS = path.resolve(__dirname, '../../test-artifacts/console');
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

async function signIn(tab: ConsoleTab, url: string, token: string): Promise<void> {
  await tab.page.goto(`${url}/console`);
  await tab.page.getByLabel('Admin token').fill(token);
  await tab.page.getByRole('button', { name: 'Sign in' }).click();
  await tab.page.getByRole('navigation', { name: 'Console' }).waitFor();
}

async function visit(tab: ConsoleTab, linkName: string): Promise<void> {
  await tab.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: linkName, exact: true }).click();
  await tab.page.getByRole('heading', { level: 1, name: linkName }).waitFor();
  await tab.page.waitForLoadState('networkidle');
}

async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

const keyRow = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('rowheader', { name, exact: true }) });

describeWithBrowser('the operator console in headless Chromium', () => {
  let t: TestGateway;
  let browser: Browser;
  let ark: FakeImagesApi;
  let everything: { id: string; token: string };

  /** A project made through the admin API (30-day period); its id. */
  async function createProject(name: string, owner: string, creditsQuota = 1000): Promise<string> {
    const made = await t.api.admin('post', '/admin/projects', { name, owner, credits_quota: creditsQuota, quota_period_days: 30 });
    expect(made.status).toBe(201);
    return made.body.id as string;
  }

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-console-key', flavour: 'ark' });
    t = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: BROWSER_ARGS });
    everything = await createAdminTokenVia(
      t.api,
      [
        'keys:read',
        'keys:write',
        'channels:read',
        'channels:write',
        'generations:read',
        'generations:write',
        'webhooks:read',
        'webhooks:write',
        'audit:read',
        'usage:read',
        'tokens:write',
      ],
      {
        name: 'console operator',
      },
    );
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await ark?.close();
  });

  it('a keys:read token is offered only what it may do: Keys (without Create key, a project as its id, not a link to a page it cannot open); the admin secret gets a note that a scoped token is better', async () => {
    const reader = await createAdminTokenVia(t.api, ['keys:read'], { name: 'key reader' });
    const readersProjectId = await createProject('readers project', 'reader@example.com', 100);
    await t.createKey({ name: 'visible to readers', owner: 'reader@example.com', project_id: readersProjectId });
    const tab = await openConsole(browser, t.gateway.url);
    await signIn(tab, t.gateway.url, reader.token);
    const links = await tab.page.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents();
    expect(links).toEqual(['Keys']);
    await tab.page.getByRole('rowheader', { name: 'visible to readers' }).waitFor();
    expect(await tab.page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await tab.page.getByRole('button', { name: 'Disable' }).count()).toBe(0);
    const readersRow = keyRow(tab.page, 'visible to readers');
    await readersRow.getByText(readersProjectId, { exact: true }).waitFor();
    expect(await readersRow.getByRole('link').count()).toBe(0);
    // The token is kept in this tab's session storage, never in the URL.
    expect(tab.page.url()).not.toContain(reader.token);
    await tab.page.reload();
    await tab.page.getByRole('rowheader', { name: 'visible to readers' }).waitFor();
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();

    const root = await openConsole(browser, t.gateway.url);
    await signIn(root, t.gateway.url, ADMIN_SECRET);
    await root.page.getByRole('note').filter({ hasText: 'A scoped admin token' }).waitFor();
    expect(await root.page.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents()).toEqual([
      'Keys',
      'Projects',
      'Usage',
      'Channels',
      'Generations',
      'Webhooks',
      'Audit log',
      'Admin tokens',
    ]);
    expect(await root.check()).toEqual(clean);
    await root.context.close();
  }, 60_000);

  it('a wrong token is refused on the sign-in page, with the reason', async () => {
    const tab = await openConsole(browser, t.gateway.url);
    await tab.page.goto(`${t.gateway.url}/console`);
    await tab.page.getByLabel('Admin token').fill('hyadm_not-a-real-token');
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await tab.page.getByRole('alert').filter({ hasText: 'invalid_admin_token' }).waitFor();
    await tab.context.close();
  }, 30_000);

  it('signed out, the page is quiet (no request fails, nothing in the browser console), its one field has its own name, and it says what Cloudflare Access does', async () => {
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await page.goto(`${t.gateway.url}/console`);
    await page.getByLabel('Admin token', { exact: true }).waitFor();
    await page.waitForLoadState('networkidle');
    // As the README and docs/operators/security.md say: with CF_ACCESS_ADMIN_SCOPES, Access signs the operator in.
    await page
      .getByText('Behind Cloudflare Access with CF_ACCESS_ADMIN_SCOPES set, the console signs you in with your Access login, no token needed')
      .waitFor();
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'signed-out');
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 30_000);

  it("Keys: every control has its own name (the search's Owner, the create form's, a policy form's, all open at once), and each row's buttons name their key", async () => {
    await t.createKey({ name: 'named twice', owner: 'names@example.com' });
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await signIn(tab, t.gateway.url, everything.token);
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('button', { name: 'Edit policy of named twice', exact: true }).click();
    await page.getByRole('form', { name: 'Policy of named twice' }).waitFor();
    // Page-wide, by name alone: one field each.
    const fields = [
      'Owner (Search keys)',
      'Owner (Create key)',
      'Owner (Policy of named twice)',
      'Metadata (Search keys)',
      'Metadata (Create key)',
      'Name (Create key)',
      'Name (Policy of named twice)',
    ];
    const counts: Array<[string, number]> = [];
    for (const name of fields) counts.push([name, await page.getByLabel(name, { exact: true }).count()]);
    expect(counts).toEqual(fields.map((name) => [name, 1]));
    for (const action of ['Quota', 'Rotate', 'Disable'])
      expect(await page.getByRole('button', { name: `${action} of named twice`, exact: true }).count()).toBe(1);
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'keys-forms');
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);

  it("Projects: create one, see it listed, open it to see its key (made through the admin API), disable and enable it; on Keys, the key's Project links to it", async () => {
    const operator = await createAdminTokenVia(t.api, ['keys:read', 'keys:write', 'projects:read', 'projects:write'], { name: 'project operator' });
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await signIn(tab, t.gateway.url, operator.token);
    await visit(tab, 'Projects');
    await page.getByRole('button', { name: 'Create project' }).click();
    const form = page.getByRole('form', { name: 'Create project' });
    await form.getByLabel('Name (Create project)', { exact: true }).fill('poster studio');
    await form.getByLabel('Owner (Create project)', { exact: true }).fill('studio@example.com');
    await form.getByLabel('Credits per period (Create project)', { exact: true }).fill('5000');
    await form.getByLabel('Period (days) (Create project)', { exact: true }).fill('7');
    await form.getByRole('button', { name: 'Create', exact: true }).click();

    // Listed with its owner, status, credits used of its quota and when its period resets, as the API has it.
    const projectRow = keyRow(page, 'poster studio');
    await projectRow.waitFor();
    const listed = (await t.api.admin('get', '/admin/projects?owner=studio%40example.com')).body.data;
    expect(listed).toEqual([expect.objectContaining({ name: 'poster studio', status: 'active', credits_quota: 5000, quota_period_days: 7, credits_used: 0 })]);
    const project = listed[0] as { id: string; period_resets_at: string };
    const resetsAt = await page.evaluate(`new Date(${JSON.stringify(project.period_resets_at)}).toLocaleString()`);
    expect((await projectRow.getByRole('cell').allTextContents()).slice(0, 4)).toEqual(['studio@example.com', 'active', '0 / 5000', resetsAt]);
    // The new project is opened, and the address names it.
    const details = page.getByRole('region', { name: 'Project poster studio' });
    await details.getByText(project.id).waitFor();
    expect(new URL(page.url()).hash).toBe(`#${project.id}`);

    // A key of the project (and one of none) made through the admin API: reloaded, the address reopens the project, whose keys are listed (listProjectKeys).
    const member = await t.createKey({ name: 'studio member', owner: 'studio@example.com', project_id: project.id });
    await t.createKey({ name: 'projectless', owner: 'studio@example.com' });
    await page.reload();
    const projectKeys = details.getByRole('table', { name: 'Keys of poster studio' });
    await projectKeys.getByRole('rowheader', { name: 'studio member' }).waitFor();
    expect(await projectKeys.getByRole('rowheader').allTextContents()).toEqual(['studio member']);

    // Disable: the list and the details say so, and so does the API; Enable brings it back.
    await page.getByRole('button', { name: 'Disable of poster studio', exact: true }).click();
    await projectRow.locator('.badge', { hasText: 'disabled' }).waitFor();
    await details.locator('.badge', { hasText: 'disabled' }).waitFor();
    expect((await t.api.admin('get', `/admin/projects/${project.id}`)).body.status).toBe('disabled');
    // Every control named once with the create form, the details and the filters all shown.
    await page.getByRole('button', { name: 'Create project' }).click();
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'projects');
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Enable of poster studio', exact: true }).click();
    await projectRow.locator('.badge', { hasText: 'active' }).waitFor();
    expect((await t.api.admin('get', `/admin/projects/${project.id}`)).body.status).toBe('active');

    // Keys: the member's Project is a link to the project; the other key has none.
    await visit(tab, 'Keys');
    const memberRow = keyRow(page, 'studio member');
    expect(await memberRow.getAttribute('data-key-id')).toBe(member.id);
    expect(await keyRow(page, 'projectless').getByRole('link').count()).toBe(0);
    expect(await pageProblems(page)).toEqual([]);
    await memberRow.getByRole('link', { name: project.id, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Projects' }).waitFor();
    await details.getByRole('table', { name: 'Keys of poster studio' }).getByRole('rowheader', { name: 'studio member' }).waitFor();
    expect(page.url()).toBe(`${t.gateway.url}/console/projects#${project.id}`);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);

  /** Signs `token` in, opens project `name`'s details on the Projects page, and gives its guardrails form. */
  async function openProjectGuardrails(token: string, name: string, projectId: string) {
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await signIn(tab, t.gateway.url, token);
    await visit(tab, 'Projects');
    await page.getByRole('button', { name: `Details of ${name}`, exact: true }).click();
    const details = page.getByRole('region', { name: `Project ${name}` });
    const detail = (term: string) => details.locator('dt', { hasText: term }).locator('+ dd');
    await details.getByText(projectId).waitFor();
    const guardrails = details.getByRole('form', { name: `Guardrails of ${name}` });
    const field = (label: string) => guardrails.getByLabel(`${label} (Guardrails of ${name})`, { exact: true });
    return { tab, page, details, detail, guardrails, field };
  }

  it("Projects: a project's guardrails (prompt retention, a moderation hook whose secret is shown once, then removed) and its quota, set in its details", async () => {
    // A moderation hook's endpoint receives every prompt: setting one also takes generations:read (security.md).
    const operator = await createAdminTokenVia(t.api, ['projects:read', 'projects:write', 'generations:read'], { name: 'guardrails operator' });
    const projectId = await createProject('guarded studio', 'guarded@example.com');
    const { tab, page, details, detail, guardrails, field } = await openProjectGuardrails(operator.token, 'guarded studio', projectId);
    expect(await detail('Prompt retention').textContent()).toBe('gateway default (PROMPT_RETENTION)');
    expect(await detail('Moderation hook').textContent()).toBe('none');

    // Retention narrowed to the prompt's hash, and a hook set: its secret is shown once.
    await field('Prompt retention').selectOption('hash');
    await field('Moderation hook URL').fill('https://moderation.example.com/hook');
    await field('Hook timeout (ms)').fill('1500');
    await field('Hook failure mode').selectOption('fail_open');
    await guardrails.getByRole('button', { name: 'Save guardrails', exact: true }).click();
    const secretShown = details.getByLabel('Moderation hook secret', { exact: true });
    const secret = (await secretShown.textContent())?.trim() ?? '';
    expect(secret).toMatch(/^whsec_/);
    await detail('Prompt retention').filter({ hasText: 'hash' }).waitFor();
    expect(await detail('Moderation hook').textContent()).toBe('https://moderation.example.com/hook, 1500 ms timeout, fails open');
    const hooked = (await t.api.admin('get', `/admin/projects/${projectId}`)).body;
    expect(hooked).toMatchObject({
      prompt_retention: 'hash',
      moderation_hook: { url: 'https://moderation.example.com/hook', timeout_ms: 1500, failure_mode: 'fail_open' },
    });
    expect(hooked.moderation_hook.secret).toBeUndefined();
    // Every control named once with the secret and both forms shown.
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'project-guardrails');
    await details.getByRole('button', { name: 'Done', exact: true }).click();
    expect(await secretShown.count()).toBe(0);

    // The hook's secret rotated: a new one shown once; the old one still signs for the overlap, which the details say.
    await details.getByRole('button', { name: 'Rotate hook secret', exact: true }).click();
    const rotatedSecret = (await secretShown.textContent())?.trim() ?? '';
    expect(rotatedSecret).toMatch(/^whsec_/);
    expect(rotatedSecret).not.toBe(secret);
    await detail('Moderation hook')
      .filter({ hasText: /; the old secret signs too until / })
      .waitFor();
    const rotatedHook = (await t.api.admin('get', `/admin/projects/${projectId}`)).body.moderation_hook;
    expect(Date.parse(rotatedHook.previous_secret_expires_at)).toBeGreaterThan(t.clock.now() + 86_000_000);
    await details.getByRole('button', { name: 'Done', exact: true }).click();
    expect(await secretShown.count()).toBe(0);

    // A limit changed alone leaves the hook as it is (no new secret).
    await field('Requests per minute').fill('120');
    await guardrails.getByRole('button', { name: 'Save guardrails', exact: true }).click();
    await detail('Requests per minute').filter({ hasText: '120' }).waitFor();
    expect(await secretShown.count()).toBe(0);
    expect((await t.api.admin('get', `/admin/projects/${projectId}`)).body).toMatchObject({
      rate_limit_rpm: 120,
      prompt_retention: 'hash',
      moderation_hook: { url: 'https://moderation.example.com/hook', failure_mode: 'fail_open' },
    });

    // An empty URL removes the hook.
    await field('Moderation hook URL').fill('');
    await guardrails.getByRole('button', { name: 'Save guardrails', exact: true }).click();
    await detail('Moderation hook')
      .filter({ hasText: /^none$/ })
      .waitFor();
    expect((await t.api.admin('get', `/admin/projects/${projectId}`)).body).toMatchObject({ moderation_hook: null, prompt_retention: 'hash' });

    // The quota, shared by the project's keys.
    const quota = details.getByRole('form', { name: 'Quota of guarded studio' });
    await quota.getByLabel('New credits per period (Quota of guarded studio)', { exact: true }).fill('2500');
    await quota.getByLabel('New period (days) (Quota of guarded studio)', { exact: true }).fill('14');
    await quota.getByLabel("Reset this period's usage (Quota of guarded studio)", { exact: true }).check();
    await quota.getByRole('button', { name: 'Set quota', exact: true }).click();
    await detail('Credits').filter({ hasText: '0 used of 2500 per 14 days' }).waitFor();
    expect((await t.api.admin('get', `/admin/projects/${projectId}`)).body).toMatchObject({ credits_quota: 2500, quota_period_days: 14 });
    expect(await quota.getByLabel("Reset this period's usage (Quota of guarded studio)", { exact: true }).isChecked()).toBe(false);

    // Reloaded, the secret is nowhere on the page.
    await page.reload();
    await details.getByText(projectId).waitFor();
    expect(await page.content()).not.toContain(secret);
    expect(await pageProblems(page)).toEqual([]);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);

  it("Prompt rules: a project's set in its guardrails (ids kept when saved again, a pattern the gateway refuses shown with its reason) and a key's in its policy, which then refuses a prompt", async () => {
    const operator = await createAdminTokenVia(t.api, ['projects:read', 'projects:write', 'keys:read', 'keys:write'], { name: 'rules operator' });
    const projectId = await createProject('ruled studio', 'rules@example.com');
    const rulesOfProject = async () => (await t.api.admin('get', `/admin/projects/${projectId}`)).body.prompt_rules as Array<Record<string, unknown>> | null;
    const { tab, page, detail, guardrails, field } = await openProjectGuardrails(operator.token, 'ruled studio', projectId);
    expect(await detail('Prompt rules').textContent()).toBe('none');

    const save = () => guardrails.getByRole('button', { name: 'Save guardrails', exact: true }).click();
    await field('Maximum prompt length').fill('200');
    await field('Blocked terms').fill('watermark');
    await field('Blocked patterns').fill('\\bgore\\b');
    expect(await field('Allowed prompts (patterns)').inputValue()).toBe('');
    await save();
    await detail('Prompt rules').filter({ hasText: '3 rule(s)' }).waitFor();
    const first = await rulesOfProject();
    expect(first).toEqual([
      { id: expect.stringMatching(/^gr_/), kind: 'max_length', max: 200 },
      { id: expect.stringMatching(/^gr_/), kind: 'blocked_term', term: 'watermark' },
      { id: expect.stringMatching(/^gr_/), kind: 'blocked_pattern', pattern: '\\bgore\\b' },
    ]);
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'project-prompt-rules');

    // Only the term changed: the other rules keep their ids, the new term gets its own.
    await field('Blocked terms').fill('signature');
    await save();
    await detail('Prompt rules').filter({ hasText: 'blocks “signature”' }).waitFor();
    const second = await rulesOfProject();
    expect(second).toEqual([
      { id: first?.[0]?.id, kind: 'max_length', max: 200 },
      { id: expect.stringMatching(/^gr_/), kind: 'blocked_term', term: 'signature' },
      { id: first?.[2]?.id, kind: 'blocked_pattern', pattern: '\\bgore\\b' },
    ]);
    expect(second?.[1]?.id).not.toBe(first?.[1]?.id);

    // A backreference cannot be matched in linear time: the gateway refuses it (`(a+)+$` it accepts, and runs
    // in linear time), the form says why, and the stored rules stay as they were.
    await field('Blocked patterns').fill('\\bgore\\b\n(a)\\1');
    await save();
    await guardrails
      .getByRole('alert')
      .filter({ hasText: 'prompt_rules[3].pattern: is not a usable pattern: backreferences are not supported' })
      .filter({ hasText: '(invalid_request)' })
      .waitFor();
    expect(await rulesOfProject()).toEqual(second);
    expect(await pageProblems(page)).toEqual([]);
    // The refusal is the one failed request (Chromium logs it too); nothing else went wrong.
    expect(await tab.check()).toEqual({
      ...clean,
      failedRequests: [`PATCH ${t.gateway.url}/admin/projects/${projectId} 400`],
      consoleErrors: [expect.stringContaining('status of 400')],
    });
    tab.misconduct.failedRequests.length = 0;
    tab.misconduct.consoleErrors.length = 0;

    // A key's own rule, set in its policy form: the gateway then refuses a prompt with the term.
    const key = await t.createKey({ name: 'ruled key', owner: 'rules@example.com' });
    const prompt = 'a lighthouse with a trademark logo';
    expect((await t.api.client(key.key, localRequest({ prompt }))).status).toBe(200);
    await visit(tab, 'Keys');
    await keyRow(page, 'ruled key').getByRole('button', { name: 'Edit policy of ruled key', exact: true }).click();
    const policy = page.getByRole('form', { name: 'Policy of ruled key' });
    await policy.getByLabel('Blocked terms (Policy of ruled key)', { exact: true }).fill('trademark logo');
    expect(await pageProblems(page)).toEqual([]);
    await policy.getByRole('button', { name: 'Save policy', exact: true }).click();
    await policy.waitFor({ state: 'detached' });
    const keyRules = (await t.api.admin('get', `/admin/keys/${key.id}`)).body.prompt_rules;
    expect(keyRules).toEqual([{ id: expect.stringMatching(/^gr_/), kind: 'blocked_term', term: 'trademark logo' }]);
    const refused = await t.api.client(key.key, localRequest({ prompt }));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'prompt_blocked' });
    expect(refused.body.error.message).toContain(keyRules[0].id);

    // Saved again with only the rate changed, the rule is neither sent nor renamed.
    await keyRow(page, 'ruled key').getByRole('button', { name: 'Edit policy of ruled key', exact: true }).click();
    expect(await policy.getByLabel('Blocked terms (Policy of ruled key)', { exact: true }).inputValue()).toBe('trademark logo');
    await policy.getByLabel('Requests per minute (Policy of ruled key)', { exact: true }).fill('77');
    await policy.getByRole('button', { name: 'Save policy', exact: true }).click();
    await keyRow(page, 'ruled key').getByRole('cell', { name: '77', exact: true }).waitFor();
    expect((await t.api.admin('get', `/admin/keys/${key.id}`)).body).toMatchObject({ rate_limit_rpm: 77, prompt_rules: keyRules });
    expect(await pageProblems(page)).toEqual([]);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 90_000);

  it('Projects: created with a prompt retention and a moderation hook, the hook secret is shown once in its details', async () => {
    const operator = await createAdminTokenVia(t.api, ['projects:read', 'projects:write', 'generations:read'], { name: 'hooked creator' });
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await signIn(tab, t.gateway.url, operator.token);
    await visit(tab, 'Projects');
    await page.getByRole('button', { name: 'Create project' }).click();
    const form = page.getByRole('form', { name: 'Create project' });
    const field = (label: string) => form.getByLabel(`${label} (Create project)`, { exact: true });
    await field('Name').fill('hooked at birth');
    await field('Owner').fill('hooked@example.com');
    await field('Prompt retention').selectOption('none');
    await field('Moderation hook URL').fill('https://moderation.example.com/born');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    const details = page.getByRole('region', { name: 'Project hooked at birth' });
    const secret = (await details.getByLabel('Moderation hook secret', { exact: true }).textContent())?.trim() ?? '';
    expect(secret).toMatch(/^whsec_/);
    const created = (await t.api.admin('get', '/admin/projects?owner=hooked%40example.com')).body.data;
    expect(created).toEqual([
      expect.objectContaining({
        prompt_retention: 'none',
        moderation_hook: { url: 'https://moderation.example.com/born', timeout_ms: 2000, failure_mode: 'fail_closed', previous_secret_expires_at: null },
      }),
    ]);
    expect(await pageProblems(page)).toEqual([]);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);

  it('Keys: while the keys are on their way, the table says so', async () => {
    await t.createKey({ name: 'loaded later', owner: 'later@example.com' });
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // Hold the keys list until the loading state has been seen.
    await page.route(
      (url) => url.pathname === '/admin/keys',
      async (route) => {
        await held;
        await route.continue();
      },
    );
    await signIn(tab, t.gateway.url, everything.token);
    await page.getByRole('status').filter({ hasText: 'Loading client keys…' }).waitFor();
    expect(await page.getByRole('table', { name: 'Client keys' }).getAttribute('aria-busy')).toBe('true');
    await screenshot(page, 'keys-loading');
    release();
    await page.getByRole('rowheader', { name: 'loaded later', exact: true }).waitFor();
    expect(await page.getByRole('status').filter({ hasText: 'Loading' }).count()).toBe(0);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);

  it('every page but Usage, signed in with a token holding every scope: keys, channels, generations, webhooks, audit log, admin tokens; no request elsewhere, no CSP violation, no console error, no serious accessibility violation', async () => {
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    const a11y: Record<string, string[]> = {};
    await signIn(tab, t.gateway.url, everything.token);
    a11y.keys = await pageProblems(page);

    // Keys: create, read the secret once, re-quota, disable.
    await page.getByRole('button', { name: 'Create key' }).click();
    const form = page.getByRole('form', { name: 'Create key' });
    a11y['create key'] = await pageProblems(page);
    await form.getByLabel('Name (Create key)', { exact: true }).fill('console-made');
    await form.getByLabel('Owner (Create key)', { exact: true }).fill('ops@example.com');
    await form.getByLabel('Credits per period').fill('100');
    await form.getByLabel('Allowed providers').fill('local, jimeng');
    await form.getByLabel('Metadata').fill('team=design');
    await form.getByRole('button', { name: 'Create' }).click();
    const secret = (await page.getByLabel('New key').textContent())?.trim() ?? '';
    expect(secret).toMatch(/^hyai_[0-9A-Za-z]{36}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(secret);
    await screenshot(page, 'keys-new-secret');
    // The secret works, and is shown once: gone after Done and after a reload.
    expect((await t.api.send('get', '/v1/models', { headers: bearer(secret) })).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.getByLabel('New key').count()).toBe(0);
    await page.reload();
    await keyRow(page, 'console-made').waitFor();
    expect(await page.getByLabel('New key').count()).toBe(0);
    expect(await page.content()).not.toContain(secret);
    const created = (await t.api.admin('get', '/admin/keys?owner=ops@example.com')).body.data[0];
    expect(created).toMatchObject({ name: 'console-made', credits_quota: 100, allowed_providers: ['local', 'jimeng'], metadata: { team: 'design' } });

    // Filter by metadata.
    await page.getByRole('form', { name: 'Search keys' }).getByLabel('Metadata').fill('team:design');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForLoadState('networkidle');
    expect(await page.locator('tbody').first().getByRole('rowheader').allTextContents()).toEqual(['console-made']);

    await keyRow(page, 'console-made').getByRole('button', { name: 'Quota' }).click();
    await page.getByLabel('New credits per period').fill('500');
    await page.getByRole('button', { name: 'Set quota' }).click();
    await keyRow(page, 'console-made').getByRole('cell', { name: '0 / 500' }).waitFor();
    expect((await t.api.admin('get', `/admin/keys/${created.id}`)).body.credits_quota).toBe(500);

    await keyRow(page, 'console-made').getByRole('button', { name: 'Edit policy' }).click();
    const policy = page.getByRole('form', { name: 'Policy of console-made' });
    await policy.getByLabel('Requests per minute').fill('90');
    await policy.getByLabel('Allowed models').fill('local-1');
    await policy.getByRole('button', { name: 'Save policy' }).click();
    await keyRow(page, 'console-made').getByRole('cell', { name: '90', exact: true }).waitFor();
    expect((await t.api.admin('get', `/admin/keys/${created.id}`)).body).toMatchObject({ rate_limit_rpm: 90, allowed_models: ['local-1'] });

    // Rotate: the new secret shown once; the old one refused.
    await keyRow(page, 'console-made').getByRole('button', { name: 'Rotate' }).click();
    const rotated = (await page.getByLabel('New key').textContent())?.trim() ?? '';
    expect(rotated).toMatch(/^hyai_/);
    expect(rotated).not.toBe(secret);
    expect((await t.api.send('get', '/v1/models', { headers: bearer(secret) })).status).toBe(401);
    expect((await t.api.send('get', '/v1/models', { headers: bearer(rotated) })).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();

    await keyRow(page, 'console-made').getByRole('button', { name: 'Disable' }).click();
    await keyRow(page, 'console-made').getByRole('button', { name: 'Enable' }).waitFor();
    expect((await t.api.admin('get', `/admin/keys/${created.id}`)).body.status).toBe('disabled');
    expect((await t.api.send('get', '/v1/models', { headers: bearer(rotated) })).body.error.code).toBe('key_disabled');
    await screenshot(page, 'keys');

    // Channels: add one on the fake Ark account, and test it.
    await visit(tab, 'Channels');
    // The environment's local account, named once by its provider (its transport is the same word).
    await page.getByRole('rowheader', { name: 'local (environment)', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Add channel' }).click();
    const channelForm = page.getByRole('form', { name: 'Add channel' });
    // Every transport of the provider registry is offered, in its order (generated/channel-transports.ts).
    const offered = await channelForm
      .getByLabel('Transport')
      .locator('option')
      .evaluateAll((options) => options.map((option) => (option as unknown as { value: string }).value));
    expect(offered).toEqual(transportFacts(FORMATS).map((facts) => facts.transport));
    await channelForm.getByLabel('Name').fill('ark from the console');
    await channelForm.getByLabel('Transport').selectOption('ark');
    expect(await channelForm.getByLabel('Provider').inputValue()).toBe('jimeng');
    await channelForm.getByLabel('Base URL').fill(ark.url);
    await channelForm.getByLabel('Models').fill('jimeng-4.5');
    await channelForm.getByLabel('Priority').fill('5');
    await channelForm.getByLabel('Weight').fill('2');
    await channelForm.getByLabel('API key').fill('ark-console-key');
    a11y['add channel'] = await pageProblems(page);
    await channelForm.getByRole('button', { name: 'Add' }).click();
    const channelRow = keyRow(page, 'ark from the console');
    await channelRow.getByRole('button', { name: 'Test' }).click();
    await channelRow
      .getByRole('status')
      .filter({ hasText: /^ok in \d+ ms$/ })
      .waitFor();
    // Its live load against its limits (GET /admin/channels/{id}/health): nothing in flight, no cap.
    await channelRow.getByText('0 / ∞ in flight').waitFor();
    await channelRow.getByText(/breaker closed/).waitFor();
    expect(ark.made.length).toBe(1);
    const channel = (await t.api.admin('get', '/admin/channels')).body.data.find((c: { name: string }) => c.name === 'ark from the console');
    expect(channel).toMatchObject({ priority: 5, weight: 2, status: 'enabled' });
    a11y.channels = await pageProblems(page);
    await screenshot(page, 'channels');

    // Traffic for the Usage page and the Generations page.
    const client = await t.createKey({ name: 'traffic', owner: 'studio@example.com', allowed_providers: ['local', 'jimeng'], credits_quota: 1000 });
    for (const prompt of ['a boat', 'a lighthouse', 'a harbour']) {
      expect((await t.api.client(client.key, { prompt, model: 'local-1', size: '64x64', response_format: 'url' })).status).toBe(200);
    }
    expect((await t.api.client(client.key, { prompt: 'an ark boat', model: 'jimeng-4.5', response_format: 'url' })).status).toBe(200);
    const queued = await t.api.send('post', '/images/generate', {
      headers: { ...bearer(client.key), Prefer: 'respond-async' },
      body: { prompt: 'held [hold:cancel]', model: 'jimeng-4.5' },
    });
    expect(queued.status).toBe(202);
    await ark.whenHeld('cancel');

    // Generations: every key's, filtered by the key; their images; cancel the running one (audited).
    await visit(tab, 'Generations');
    const running = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: queued.body.id }) });
    await running.waitFor();
    // The key that made it, by name (from the keys list), not by id.
    await running.getByRole('cell', { name: 'traffic', exact: true }).waitFor();
    await page.getByLabel('Key id').fill(client.id);
    await page.getByRole('button', { name: 'Show generations' }).click();
    await page
      .locator('tbody tr')
      .filter({ hasNot: page.getByRole('cell', { name: 'traffic', exact: true }) })
      .first()
      .waitFor({ state: 'detached' });
    expect(await page.locator('tbody tr').count()).toBe(5);
    await running.getByRole('button', { name: 'Cancel' }).click();
    await running.locator('.badge', { hasText: 'canceled' }).waitFor();
    expect((await t.api.send('get', `/generations/${queued.body.id}`, { headers: bearer(client.key) })).body.status).toBe('canceled');
    expect((await t.api.admin('get', `/admin/audit-events?action=generation.canceled&target=${queued.body.id}`)).body.data).toEqual([
      expect.objectContaining({ actor: everything.id, target: queued.body.id }),
    ]);
    ark.releaseHeld('cancel');
    // Images load from their signed URLs on this origin.
    const images = page.locator('td.thumbs img');
    expect(await images.count()).toBeGreaterThanOrEqual(4);
    await page.waitForLoadState('networkidle');
    expect(await images.evaluateAll((all) => all.every((image) => (image as unknown as { naturalWidth: number }).naturalWidth > 0))).toBe(true);
    a11y.generations = await pageProblems(page);
    await screenshot(page, 'generations');

    // Webhooks: add an endpoint (its secret shown once), send a test event, rotate the secret.
    await visit(tab, 'Webhooks');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByLabel('URL').fill('http://127.0.0.1:9/hooks');
    await page.getByRole('form', { name: 'Add endpoint' }).getByRole('button', { name: 'Add' }).click();
    expect(await page.getByLabel('Signing secret').textContent()).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('button', { name: 'Send test' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /Test event msg_\w+ queued/ })
      .waitFor();
    await page.getByRole('region', { name: 'Deliveries to http://127.0.0.1:9/hooks' }).getByRole('rowheader', { name: 'webhook.test' }).waitFor();
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    expect(await page.getByLabel('Signing secret').textContent()).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'Done' }).click();
    a11y.webhooks = await pageProblems(page);
    await screenshot(page, 'webhooks');

    // Audit log, filtered by action.
    await visit(tab, 'Audit log');
    await page.getByLabel('Action').fill('key.quota_set');
    await Promise.all([
      page.waitForResponse((response) => response.url().includes('action=key.quota_set')),
      page.getByRole('button', { name: 'Filter' }).click(),
    ]);
    // The response is in before the filtered page is drawn: wait for the one row.
    await page.locator('tbody tr').nth(1).waitFor({ state: 'detached' });
    await page.getByRole('cell', { name: created.id, exact: true }).waitFor();
    expect(await page.locator('tbody tr').count()).toBe(1);
    // Its changes read as "field: before → after", one per line, not as JSON.
    const changes = await page
      .getByRole('row')
      .filter({ has: page.getByRole('cell', { name: created.id, exact: true }) })
      .getByRole('listitem')
      .allTextContents();
    expect(changes).toContain('credits_quota: 100 → 500');
    expect(changes.join('\n')).not.toMatch(/[{}"]/);
    a11y['audit log'] = await pageProblems(page);
    await screenshot(page, 'audit-log');

    // Admin tokens.
    await visit(tab, 'Admin tokens');
    await page.getByRole('rowheader', { name: /console operator/ }).waitFor();
    a11y['admin tokens'] = await pageProblems(page);
    await screenshot(page, 'admin-tokens');

    expect(a11y).toEqual(Object.fromEntries(Object.keys(a11y).map((name) => [name, []])));
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 180_000);

  it("Usage: a chart whose numbers are the analytics API's (GET /admin/usage, getUsageReport), its CSV export is the API's CSV, and its totals by project and for one project are the API's", async () => {
    const client = await t.createKey({ name: 'usage traffic', owner: 'charts@example.com', allowed_providers: ['local'], credits_quota: 1000 });
    for (const [prompt, n] of [
      ['one', 1],
      ['two', 2],
      ['three', 1],
    ] as const) {
      expect((await t.api.client(client.key, { prompt, model: 'local-1', size: '64x64', n, response_format: 'b64_json' })).status).toBe(200);
    }
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await signIn(tab, t.gateway.url, everything.token);
    // Usage: the chart's numbers are the analytics API's.
    await visit(tab, 'Usage');
    await page.getByLabel('Range').selectOption('24');
    await page.getByLabel('Bucket').selectOption('hour');
    await page.getByLabel('Group by').selectOption('model');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForLoadState('networkidle');
    const to = Math.ceil(Date.now() / HOUR_MS) * HOUR_MS;
    const range = `from=${encodeURIComponent(new Date(to - 24 * HOUR_MS).toISOString())}&to=${encodeURIComponent(new Date(to).toISOString())}`;
    const report = await t.api.send('get', `/admin/usage?${range}&group_by=model`, { headers: bearer(everything.token) });
    expect(report.status).toBe(200);
    const expected = (report.body.data as Array<{ model: string; requests: number; blocked: number; credits_charged: number; images_delivered: number }>)
      .map((row) => [row.model, String(row.requests), String(row.blocked), String(row.images_delivered), String(row.credits_charged)])
      .sort();
    expect(expected.length).toBeGreaterThan(0);
    await page.locator('.chart canvas').first().waitFor();
    const shown = await page
      .getByRole('table', { name: 'Totals by model' })
      .locator('tbody tr')
      .evaluateAll((rows) =>
        rows.map((row) => {
          const cells = Array.from((row as unknown as { children: ArrayLike<{ textContent: string }> }).children, (cell) => cell.textContent);
          return [cells[0], cells[1], cells[5], cells[6], cells[7]];
        }),
      );
    expect(shown.sort()).toEqual(expected);
    // The chart's legend names the same models.
    const legend = await page.locator('.u-legend .u-series .u-label').allTextContents();
    expect(legend.filter((label) => label !== 'Bucket (UTC)' && label !== '').sort()).toEqual(expected.map(([model]) => model));
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'usage');

    // CSV export: the file is the API's CSV.
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    const csv = fs.readFileSync((await download.path()) as string, 'utf8');
    const apiCsv = await t.api.send('get', `/admin/usage?${range}&bucket=hour&group_by=model&limit=1000`, {
      headers: { ...bearer(everything.token), Accept: 'text/csv' },
    });
    expect(csv).toBe(apiCsv.text);
    expect(csv.split('\n')[0]).toContain('credits_charged');

    // Day buckets: one per UTC day of the range, named by its date (no hours), each with the API's numbers.
    await page.getByLabel('Range').selectOption('168');
    await page.getByLabel('Bucket').selectOption('day');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText("The chart's numbers per day").click();
    const daily = page.getByRole('table', { name: 'Credits charged per day by model' });
    await daily.waitFor();
    const week = rangeOf(168);
    const dayName = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
    const days: number[] = [];
    for (let day = Math.floor(Date.parse(week.from) / DAY_MS) * DAY_MS; day < Date.parse(week.to); day += DAY_MS) days.push(day);
    expect(await daily.getByRole('rowheader').allTextContents()).toEqual(days.map((day) => dayName.format(day)));
    const weekReport = await t.api.send(
      'get',
      `/admin/usage?from=${encodeURIComponent(week.from)}&to=${encodeURIComponent(week.to)}&bucket=day&group_by=model&model=local-1`,
      { headers: bearer(everything.token) },
    );
    const creditsByDay = new Map(
      (weekReport.body.data as Array<{ bucket_start: string; credits_charged: number }>).map((row) => [
        dayName.format(Date.parse(row.bucket_start)),
        row.credits_charged,
      ]),
    );
    const localColumn = (await daily.getByRole('columnheader').allTextContents()).indexOf('local-1');
    expect(localColumn).toBeGreaterThan(0);
    const shownByDay = await daily.locator('tbody tr').evaluateAll(
      (rows, column) =>
        rows.map((row) => {
          const cells = Array.from((row as unknown as { children: ArrayLike<{ textContent: string }> }).children, (cell) => cell.textContent);
          return [cells[0], Number(cells[column])];
        }),
      localColumn,
    );
    expect(shownByDay).toEqual(days.map((day) => [dayName.format(day), creditsByDay.get(dayName.format(day)) ?? 0]));
    expect(await pageProblems(page)).toEqual([]);
    await screenshot(page, 'usage-days');

    // By project: the Group by choice is the API's group_by=project ("(none)" for keys in no project), the
    // Project filter its project_id.
    const projectId = await createProject('usage charts', 'charts@example.com');
    const member = await t.createKey({
      name: 'project traffic',
      owner: 'charts@example.com',
      allowed_providers: ['local'],
      credits_quota: 1000,
      project_id: projectId,
    });
    const made = await t.api.client(member.key, { prompt: 'four', model: 'local-1', size: '64x64', n: 2, response_format: 'b64_json' });
    expect(made.status).toBe(200);
    await page.getByLabel('Range').selectOption('24');
    await page.getByLabel('Bucket').selectOption('hour');
    await page.getByLabel('Group by').selectOption('project');
    await page.getByRole('button', { name: 'Show' }).click();
    const byProject = page.getByRole('table', { name: 'Totals by project' });
    await byProject.getByRole('rowheader', { name: projectId, exact: true }).waitFor();
    const today = rangeOf(24);
    const projectReport = await t.api.send('get', `/admin/usage?from=${encodeURIComponent(today.from)}&to=${encodeURIComponent(today.to)}&group_by=project`, {
      headers: bearer(everything.token),
    });
    const totalsOf = (row: { requests: number; blocked: number; images_delivered: number; credits_charged: number }) =>
      [row.requests, row.blocked, row.images_delivered, row.credits_charged].map(String);
    const expectedByProject = (
      projectReport.body.data as Array<{ project_id: string | null; requests: number; blocked: number; images_delivered: number; credits_charged: number }>
    )
      .map((row) => [row.project_id ?? '(none)', ...totalsOf(row)])
      .sort();
    expect(expectedByProject).toContainEqual([projectId, '1', '0', '2', '2']);
    expect(expectedByProject.map(([name]) => name)).toContain('(none)');
    const shownByProject = await byProject.locator('tbody tr').evaluateAll((rows) =>
      rows.map((row) => {
        const cells = Array.from((row as unknown as { children: ArrayLike<{ textContent: string }> }).children, (cell) => cell.textContent);
        return [cells[0], cells[1], cells[5], cells[6], cells[7]];
      }),
    );
    expect(shownByProject.sort()).toEqual(expectedByProject);
    // The Project filter: only the project's key.
    await page.getByLabel('Project filter').fill(projectId);
    await page.getByLabel('Group by').selectOption('key');
    await page.getByRole('button', { name: 'Show' }).click();
    const byKey = page.getByRole('table', { name: 'Totals by key' });
    await byKey.waitFor();
    expect(await byKey.getByRole('rowheader').allTextContents()).toEqual([member.id]);
    expect(await pageProblems(page)).toEqual([]);

    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 90_000);

  it('the keyboard reaches the sign-in form and every navigation link', async () => {
    const tab = await openConsole(browser, t.gateway.url);
    const { page } = tab;
    await page.goto(`${t.gateway.url}/console`);
    await page.getByLabel('Admin token').waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.id')).toBe(await page.getByLabel('Admin token').getAttribute('id'));
    await page.keyboard.type(everything.token);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Console' }).waitFor();
    const reached: string[] = [];
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      reached.push(String(await page.evaluate('document.activeElement.textContent')));
    }
    for (const name of ['Keys', 'Usage', 'Channels', 'Generations', 'Webhooks', 'Audit log', 'Admin tokens']) expect(reached).toContain(name);
    await page.getByRole('link', { name: 'Audit log' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Audit log' }).waitFor();
    expect(page.url()).toBe(`${t.gateway.url}/console/audit-log`);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);
});

describeWithBrowser('the operator console behind Cloudflare Access (CF_ACCESS_ADMIN_SCOPES), in headless Chromium', () => {
  const AUD = 'console-aud-0123456789abcdef';
  let t: TestGateway;
  let browser: Browser;
  let jwks: Awaited<ReturnType<typeof startJwksServer>>;
  let signingKey: Awaited<ReturnType<typeof makeKey>>;

  /** What Access adds to each request it forwards to the origin: its JWT for this user. */
  async function accessJwt(): Promise<string> {
    const now = Math.floor(t.clock.now() / 1000);
    return new SignJWT({ type: 'app', email: 'ada@example.com', sub: 'user-1' })
      .setProtectedHeader({ alg: 'RS256', kid: signingKey.kid })
      .setIssuer('https://console-team.cloudflareaccess.com')
      .setAudience(AUD)
      .setIssuedAt(now - 60)
      .setExpirationTime(now + 600)
      .sign(signingKey.privateKey);
  }

  beforeAll(async () => {
    jwks = await startJwksServer();
    signingKey = await makeKey('console-key');
    jwks.keys.push(signingKey.jwk);
    t = await startTestGateway({
      CF_ACCESS_TEAM_DOMAIN: 'console-team.cloudflareaccess.com',
      CF_ACCESS_AUD: AUD,
      CF_ACCESS_JWKS_URL: jwks.url,
      CF_ACCESS_ADMIN_SCOPES: 'keys:read,keys:write,usage:read',
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: BROWSER_ARGS });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await jwks?.close();
  });

  it('with only the Access JWT on every request, the operator is signed in with no token typed and none kept', async () => {
    await t.createKey({ name: 'seen through Access', owner: 'access@example.com' });
    const tab = await openConsole(browser, t.gateway.url);
    await tab.context.setExtraHTTPHeaders({ 'Cf-Access-Jwt-Assertion': await accessJwt() });
    await tab.page.goto(`${t.gateway.url}/console`);
    await tab.page.getByText('Signed in through Cloudflare Access as ada@example.com').waitFor();
    await tab.page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
    await tab.page.getByRole('rowheader', { name: 'seen through Access' }).waitFor();
    expect(await tab.page.getByLabel('Admin token').count()).toBe(0);
    expect(await tab.page.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents()).toEqual(['Keys', 'Usage']);
    expect(await tab.page.evaluate('sessionStorage.length')).toBe(0);
    expect(await tab.check()).toEqual(clean);
    await tab.context.close();
  }, 60_000);
});
