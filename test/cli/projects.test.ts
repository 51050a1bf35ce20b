import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { cliRunner } from './cli-harness';

describe('admin CLI: projects (createProject ... listProjectKeys) and keys --project', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());
  const { cli, json, usageError, help } = cliRunner(() => t);
  const base = ['--owner', 'design@example.com', '--credits', '100', '--period-days', '30'];
  const keyBase = ['--owner', 'design@example.com', '--credits', '50', '--period-days', '30', '--providers', 'local'];

  it('`--help` lists every projects command and the options of create, update and quota', async () => {
    expect(await help(['--help'])).toMatch(/^\s+projects\s/m);
    const commands = await help(['projects', '--help']);
    for (const name of ['create', 'list', 'get', 'update', 'enable', 'disable', 'quota', 'rotate-hook-secret', 'keys'])
      expect(commands).toMatch(new RegExp(`^\\s+${name}\\b`, 'm'));
    expect(await help(['projects', 'create', '-h'])).toMatch(
      /--name <name>[\s\S]*--owner <owner>[\s\S]*--credits <n>[\s\S]*--period-days <n>[\s\S]*--rpm <n>[\s\S]*--max-concurrent <n>[\s\S]*--providers <list>[\s\S]*--allowed-models <list>[\s\S]*--prompt-rules <json>[\s\S]*--metadata <name=value>/,
    );
    expect(await help(['projects', 'update', '--help'])).toMatch(/--enable[\s\S]*--disable/);
    expect(await help(['projects', 'quota', '--help'])).toMatch(/--credits <n>[\s\S]*--period-days <n>[\s\S]*--reset/);
    expect(await help(['keys', 'create', '--help'])).toMatch(/--project <id>/);
    expect(await help(['keys', 'update', '--help'])).toMatch(/--project <id>\s+move the key into this project \(prj_\.\.\.\), or "none"/);
  });

  it.each([
    [['projects', 'create', '--name', 'x', '--owner', 'o', '--credits', '1'], /required option '--period-days <n>' not specified/],
    [['projects', 'create', '--name', 'x', ...base, '--prompt-rules', 'not json'], /'not json' is invalid.*JSON array/],
    [['projects', 'create', '--name', 'x', ...base, '--prompt-rules', '{"kind":"max_length","max":5}'], /is invalid.*JSON array/],
    [['projects', 'create', '--name', 'x', ...base, '--rpm', 'fast'], /'fast' is invalid/],
    [['projects', 'create', '--name', 'x', ...base, '--prompt-retention', 'some'], /'some' is invalid.*full, hash or none/],
    [['projects', 'create', '--name', 'x', ...base, '--moderation-hook', '["https://moderation.example.com"]'], /is invalid.*JSON object/],
    [['projects', 'update', 'prj_x'], /nothing to change/],
    [['projects', 'update', 'prj_x', '--enable', '--disable'], /contradict/],
    [['projects', 'quota', 'prj_x'], /required option '--credits <n>' not specified/],
    [['projects', 'keys'], /missing required argument 'id'/],
    [['projects', 'bogus'], /unknown command 'bogus'/],
  ])('usage error %j exits 2', async (args, message) => {
    await usageError(args, message);
  });

  it('--prompt-retention sets the project\'s policy; "default" gives it back to the gateway\'s', async () => {
    const created = await json(['projects', 'create', '--name', 'private', ...base, '--prompt-retention', 'hash']);
    expect(created.prompt_retention).toBe('hash');
    expect((await cli(['projects', 'get', created.id])).stdout).toMatch(/^prompt_retention:\s+hash$/m);
    expect(await json(['projects', 'update', created.id, '--prompt-retention', 'none'])).toMatchObject({ prompt_retention: 'none' });
    expect(await json(['projects', 'update', created.id, '--prompt-retention', 'default'])).toMatchObject({ prompt_retention: null });
    expect((await cli(['projects', 'get', created.id])).stdout).toMatch(/^prompt_retention:\s+default \(the gateway's PROMPT_RETENTION\)$/m);
  });

  it('create, list, get, update (and clear with "none"), disable, enable', async () => {
    const rules = [{ id: 'gr_no_logos', kind: 'blocked_term', term: 'trademark logo' }];
    const created = await json([
      'projects',
      'create',
      '--name',
      'design',
      ...base,
      '--rpm',
      '120',
      '--max-concurrent',
      '4',
      '--providers',
      'local',
      '--allowed-models',
      'local-1',
      '--prompt-rules',
      JSON.stringify(rules),
      '--metadata',
      'team=design',
    ]);
    expect(created).toMatchObject({
      name: 'design',
      owner: 'design@example.com',
      status: 'active',
      credits_quota: 100,
      credits_used: 0,
      quota_period_days: 30,
      rate_limit_rpm: 120,
      max_concurrent: 4,
      allowed_providers: ['local'],
      allowed_models: ['local-1'],
      prompt_rules: rules,
      metadata: { team: 'design' },
    });
    expect(created.id).toMatch(/^prj_/);
    t.clock.advanceMs(5); // newest first: the second project is the newer one
    const other = await json(['projects', 'create', '--name', 'ops', '--owner', 'ops@example.com', '--credits', '5', '--period-days', '7']);

    const list = await cli(['projects', 'list', '--owner', 'design@example.com']);
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+OWNER\s+STATUS\s+CREDITS\s+PERIOD\s+RPM\s+PROVIDERS$/);
    expect(list.stdout).toMatch(new RegExp(`^${created.id}\\s+design\\s+design@example.com\\s+active\\s+0/100\\s+30d\\s+120\\s+local$`, 'm'));
    expect(list.stdout).not.toContain(other.id);
    const page = await json(['projects', 'list', '--limit', '1']);
    expect(page.data.map((p: { id: string }) => p.id)).toEqual([other.id]);
    expect((await json(['projects', 'list', '--cursor', page.next_cursor])).data.map((p: { id: string }) => p.id)).toContain(created.id);

    const shown = await cli(['projects', 'get', created.id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^credits:\s+0 used of 100 \(100 left\), every 30 days$/m);
    expect(shown.stdout).toMatch(/^prompt_rules:\s+\[\{"id":"gr_no_logos","kind":"blocked_term","term":"trademark logo"\}\]$/m);
    expect(shown.stdout).toMatch(/^metadata:\s+team=design$/m);

    const updated = await json([
      'projects',
      'update',
      created.id,
      '--name',
      'design studio',
      '--rpm',
      'none',
      '--max-concurrent',
      'none',
      '--providers',
      'none',
      '--allowed-models',
      'none',
      '--prompt-rules',
      'none',
      '--metadata',
      'team=studio',
    ]);
    expect(updated).toMatchObject({
      id: created.id,
      name: 'design studio',
      rate_limit_rpm: null,
      max_concurrent: null,
      allowed_providers: null,
      allowed_models: null,
      prompt_rules: null,
      metadata: { team: 'studio' },
    });

    const disabled = await cli(['projects', 'disable', created.id]);
    expect(disabled.code).toBe(0);
    expect(disabled.stdout).toMatch(/^status:\s+disabled$/m);
    expect((await json(['projects', 'list', '--status', 'disabled'])).data.map((p: { id: string }) => p.id)).toEqual([created.id]);
    expect(await json(['projects', 'enable', created.id])).toMatchObject({ status: 'active', disabled_at: null });
    expect(await json(['projects', 'update', created.id, '--disable'])).toMatchObject({ status: 'disabled' });
    expect(await json(['projects', 'update', created.id, '--enable'])).toMatchObject({ status: 'active' });
  });

  it('keys create|update --project, projects keys, and projects quota --reset on the shared book', async () => {
    const project = await json(['projects', 'create', '--name', 'books', ...base]);
    const key = await json(['keys', 'create', '--name', 'in-project', ...keyBase, '--project', project.id]);
    expect(key.project_id).toBe(project.id);
    expect((await cli(['keys', 'get', key.id])).stdout).toMatch(new RegExp(`^project:\\s+${project.id}$`, 'm'));
    const outsider = await json(['keys', 'create', '--name', 'outside', ...keyBase]);
    expect(outsider.project_id).toBeNull();

    const keys = await cli(['projects', 'keys', project.id]);
    expect(keys.code).toBe(0);
    expect(keys.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+OWNER\s+STATUS\s+CREDITS\s+PERIOD\s+EXPIRES$/);
    expect(keys.stdout).toMatch(new RegExp(`^${key.id}\\s+in-project\\s`, 'm'));
    expect(keys.stdout).not.toContain(outsider.id);

    expect(await json(['keys', 'update', outsider.id, '--project', project.id])).toMatchObject({ project_id: project.id });
    expect((await json(['projects', 'keys', project.id, '--limit', '5'])).data.map((k: { id: string }) => k.id).sort()).toEqual([key.id, outsider.id].sort());
    expect(await json(['keys', 'update', outsider.id, '--project', 'none'])).toMatchObject({ project_id: null });
    expect((await json(['projects', 'keys', project.id])).data.map((k: { id: string }) => k.id)).toEqual([key.id]);

    const generated = await t.api.client(key.key, localRequest());
    expect(generated.status).toBe(200);
    const spent = (await json(['projects', 'get', project.id])).credits_used;
    expect(spent).toBeGreaterThan(0);

    const raised = await json(['projects', 'quota', project.id, '--credits', '500', '--period-days', '7']);
    expect(raised).toMatchObject({ credits_quota: 500, quota_period_days: 7, credits_used: spent });
    const reset = await cli(['projects', 'quota', project.id, '--credits', '400', '--reset']);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toMatch(/^credits:\s+0 used of 400 \(400 left\), every 7 days$/m);
  });

  it('a moderation hook: set with --moderation-hook (its secret printed once), shown, its secret rotated, removed with "none"', async () => {
    const hook = { url: 'https://moderation.example.com/hook', failure_mode: 'fail_closed' };
    const created = await cli(['projects', 'create', '--name', 'hooked', ...base, '--moderation-hook', JSON.stringify(hook)]);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^moderation_hook:\s+https:\/\/moderation\.example\.com\/hook \(fail_closed, 2000 ms\)$/m);
    expect(created.stdout).toMatch(/^moderation_hook_secret:\s+whsec_\S+ \(shown once: store it now\)$/m);
    const id = /^id:\s+(prj_\S+)$/m.exec(created.stdout)![1]!;
    const shown = await cli(['projects', 'get', id]);
    expect(shown.stdout).toMatch(/^moderation_hook:\s+https:\/\/moderation\.example\.com\/hook \(fail_closed, 2000 ms\)$/m);
    expect(shown.stdout).not.toContain('whsec_');
    const firstSecret = /^moderation_hook_secret:\s+(whsec_\S+)/m.exec(created.stdout)![1]!;
    const rotated = await cli(['projects', 'rotate-hook-secret', id, '--overlap-seconds', '60']);
    expect(rotated.code).toBe(0);
    expect(rotated.stdout).toMatch(
      /^moderation_hook:\s+https:\/\/moderation\.example\.com\/hook \(fail_closed, 2000 ms; the old secret signs too until \S+Z\)$/m,
    );
    const secondSecret = /^moderation_hook_secret:\s+(whsec_\S+) \(shown once: store it now\)$/m.exec(rotated.stdout)![1]!;
    expect(secondSecret).not.toBe(firstSecret);
    expect(await json(['projects', 'update', id, '--moderation-hook', JSON.stringify({ ...hook, failure_mode: 'fail_open', timeout_ms: 500 })])).toMatchObject({
      moderation_hook: { url: hook.url, failure_mode: 'fail_open', timeout_ms: 500 },
    });
    expect(await json(['projects', 'update', id, '--moderation-hook', 'none'])).toMatchObject({ moderation_hook: null });
    const noHook = await cli(['projects', 'rotate-hook-secret', id]);
    expect(noHook).toMatchObject({ code: 1, stdout: '' });
    expect(noHook.stderr).toMatch(/^error: 404 moderation_hook_not_found: Project prj_\S+ has no moderation hook\./);
    const insecure = await cli(['projects', 'update', id, '--moderation-hook', JSON.stringify({ ...hook, url: 'http://moderation.example.com/hook' })]);
    expect(insecure).toMatchObject({ code: 1, stdout: '' });
    expect(insecure.stderr).toMatch(/^error: 400 invalid_request: moderation_hook\.url must be https/);
  });

  it("refusals exit 1 with the API's code and message", async () => {
    for (const args of [
      ['projects', 'get', 'prj_missing'],
      ['projects', 'update', 'prj_missing', '--name', 'x'],
      ['projects', 'disable', 'prj_missing'],
      ['projects', 'enable', 'prj_missing'],
      ['projects', 'quota', 'prj_missing', '--credits', '1'],
      ['projects', 'keys', 'prj_missing'],
    ]) {
      const result = await cli(args);
      expect({ args, code: result.code, stdout: result.stdout }).toEqual({ args, code: 1, stdout: '' });
      expect(result.stderr).toMatch(/^error: 404 project_not_found: No project with id prj_missing/);
    }
    const unknownProject = await cli(['keys', 'create', '--name', 'x', ...keyBase, '--project', 'prj_missing']);
    expect(unknownProject).toMatchObject({ code: 1, stdout: '' });
    expect(unknownProject.stderr).toMatch(/^error: 400 invalid_request: /);
    const badProvider = await cli(['projects', 'create', '--name', 'x', ...base, '--providers', 'nope']);
    expect(badProvider).toMatchObject({ code: 1, stdout: '' });
    expect(badProvider.stderr).toMatch(/^error: 400 invalid_request: /);
  });
});
