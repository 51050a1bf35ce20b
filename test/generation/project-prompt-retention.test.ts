import { createHash } from 'node:crypto';
import type { GatewayDatabase } from '../../src/db/database';
import type { ProjectsTable } from '../../src/db/schema';
import { insertGeneration } from '../../src/generation/generations.repository';
import { applyPromptRetention, type PromptRetention } from '../../src/maintenance/prompt-retention';
import { sweepOnce } from '../../src/maintenance/sweeper';
import { generationRow, migratedDatabase } from '../helpers/generation-rows';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/**
 * What is kept of a prompt, per project (issue 38 §3; src/maintenance/prompt-retention.ts): a settled
 * generation follows its project's `prompt_retention`, else the gateway's PROMPT_RETENTION; the sweep
 * applies a tightening to rows settled before it (`hash` rows become `none`), a loosening restores
 * nothing, and the generation resources show the prompt only while it is kept.
 */
const storedRequest = (prompt: string) =>
  JSON.stringify({ entry: { model: 'local-1' }, request: { prompt, n: 1, size: '64x64' }, keep_base64: false, mark_sends: true });
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

const NOW = 1_800_000_000_000;

function projectRow(id: string, promptRetention: PromptRetention | null): ProjectsTable {
  return {
    id,
    name: id,
    owner: 'tests',
    status: 'active',
    credits_quota: 100,
    credits_used: 0,
    quota_period_days: 30,
    period_started_at: NOW,
    usage_epoch: 1,
    rate_limit_rpm: null,
    max_concurrent: null,
    allowed_providers: null,
    allowed_models: null,
    prompt_rules: null,
    prompt_retention: promptRetention,
    metadata: '{}',
    created_at: NOW,
    updated_at: NOW,
    disabled_at: null,
  };
}

describe('prompt retention per project: the sweep', () => {
  let database: GatewayDatabase;
  let drop: () => Promise<void>;

  beforeEach(async () => ({ database, drop } = await migratedDatabase()));
  afterEach(() => drop());

  const stateOf = async (id: string) => {
    const row = await database.db.selectFrom('generations').select(['request', 'prompt_retention']).where('id', '=', id).executeTakeFirstOrThrow();
    const request = row.request === null ? null : (JSON.parse(row.request) as { request: Record<string, unknown> }).request;
    return { prompt: request?.prompt, sha: request?.prompt_sha256, retention: row.prompt_retention };
  };
  const setProject = (id: string, policy: PromptRetention | null) =>
    database.db.updateTable('projects').set({ prompt_retention: policy }).where('id', '=', id).execute();
  /** A generation of `projectId` (null: an internal generation, or a key without a project); the reservation records the project after the insert. */
  const generation = async (id: string, projectId: string | null, overrides: Parameters<typeof generationRow>[1]) => {
    await insertGeneration(database.db, generationRow(id, overrides));
    if (projectId !== null) await database.db.updateTable('generations').set({ project_id: projectId, project_usage_epoch: 1 }).where('id', '=', id).execute();
  };
  const settled = (id: string, projectId: string | null, prompt = `secret of ${id}`) =>
    generation(id, projectId, { status: 'succeeded', request: storedRequest(prompt) });

  it("each project's policy applies to its settled rows; a project without one, and rows of no project, follow the gateway's", async () => {
    const { db } = database;
    await db
      .insertInto('projects')
      .values([projectRow('prj_hash', 'hash'), projectRow('prj_none', 'none'), projectRow('prj_default', null)])
      .execute();
    await settled('gen_hash', 'prj_hash');
    await settled('gen_none', 'prj_none');
    await settled('gen_default', 'prj_default');
    await settled('gen_internal', null);
    await generation('gen_running', 'prj_none', { status: 'running', request: storedRequest('still needed') });

    // The gateway keeps prompts (full): only the projects' own policies withhold any.
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(2);
    expect(await stateOf('gen_hash')).toEqual({ prompt: '', sha: sha256('secret of gen_hash'), retention: 'hash' });
    expect(await stateOf('gen_none')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
    expect(await stateOf('gen_default')).toEqual({ prompt: 'secret of gen_default', sha: undefined, retention: null });
    expect(await stateOf('gen_internal')).toEqual({ prompt: 'secret of gen_internal', sha: undefined, retention: null });
    // Its worker still needs the prompt of a running generation, whatever the policy.
    expect(await stateOf('gen_running')).toEqual({ prompt: 'still needed', sha: undefined, retention: null });
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(0);

    // PROMPT_RETENTION=hash reaches the project without its own policy and the internal generation.
    expect(await applyPromptRetention(db, 'hash', NOW)).toBe(2);
    expect(await stateOf('gen_default')).toEqual({ prompt: '', sha: sha256('secret of gen_default'), retention: 'hash' });
    expect(await stateOf('gen_internal')).toEqual({ prompt: '', sha: sha256('secret of gen_internal'), retention: 'hash' });
    expect(await stateOf('gen_none')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
  });

  it("a project's own `full` keeps its prompts under a gateway's hash or none (through the sweeper)", async () => {
    const { db } = database;
    await db
      .insertInto('projects')
      .values([projectRow('prj_full', 'full')])
      .execute();
    await settled('gen_full', 'prj_full');
    await settled('gen_internal', null);
    const sweep = (promptRetention: PromptRetention) => sweepOnce({ db, clock: { now: () => NOW }, staleAfterMs: { local: 60_000 }, promptRetention });
    expect((await sweep('none')).promptsWithheld).toBe(1);
    expect(await stateOf('gen_full')).toEqual({ prompt: 'secret of gen_full', sha: undefined, retention: null });
    expect(await stateOf('gen_internal')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
    expect((await sweep('hash')).promptsWithheld).toBe(0);
  });

  it('a tightening reaches rows settled before it: full to hash, then hash to none drops the hash; a loosening restores nothing', async () => {
    const { db } = database;
    await db
      .insertInto('projects')
      .values([projectRow('prj_a', null), projectRow('prj_b', null)])
      .execute();
    await settled('gen_a1', 'prj_a');
    await settled('gen_a2', 'prj_a');
    await settled('gen_b', 'prj_b');
    await generation('gen_a_old', 'prj_a', { status: 'failed', request: null });
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(0);

    await setProject('prj_a', 'hash');
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(3);
    expect(await stateOf('gen_a1')).toEqual({ prompt: '', sha: sha256('secret of gen_a1'), retention: 'hash' });
    expect(await stateOf('gen_a_old')).toEqual({ prompt: undefined, sha: undefined, retention: 'hash' });

    await setProject('prj_a', 'none');
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(3);
    expect(await stateOf('gen_a1')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
    expect(await stateOf('gen_a2')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
    expect(await stateOf('gen_a_old')).toEqual({ prompt: undefined, sha: undefined, retention: 'none' });
    // The other project's rows are not its business.
    expect(await stateOf('gen_b')).toEqual({ prompt: 'secret of gen_b', sha: undefined, retention: null });

    // Back to hash, or to full: what is gone stays gone, and the marks say what was applied.
    await setProject('prj_a', 'hash');
    expect(await applyPromptRetention(db, 'hash', NOW)).toBe(1); // gen_b, by the gateway's hash
    expect(await stateOf('gen_a1')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
    await setProject('prj_a', 'full');
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(0);
    expect(await stateOf('gen_a2')).toEqual({ prompt: '', sha: undefined, retention: 'none' });
  });

  it('replicas sweeping at once rewrite each row once', async () => {
    const { db } = database;
    await db
      .insertInto('projects')
      .values([projectRow('prj_none', 'none')])
      .execute();
    for (let i = 0; i < 6; i += 1) await settled(`gen_${i}`, i % 2 === 0 ? 'prj_none' : null);
    const counts = await Promise.all([applyPromptRetention(db, 'hash', NOW), applyPromptRetention(db, 'hash', NOW), applyPromptRetention(db, 'hash', NOW)]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(6);
    expect((await stateOf('gen_0')).retention).toBe('none');
    expect(await stateOf('gen_1')).toEqual({ prompt: '', sha: sha256('secret of gen_1'), retention: 'hash' });
  });
});

describe('prompt retention per project: the API', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const createProject = async (promptRetention?: PromptRetention | null) => {
    const res = await t.api.admin('post', '/admin/projects', {
      name: 'retention',
      owner: 'tests',
      credits_quota: 1000,
      quota_period_days: 30,
      ...(promptRetention === undefined ? {} : { prompt_retention: promptRetention }),
    });
    expect(res.status).toBe(201);
    return res.body as { id: string; prompt_retention: PromptRetention | null };
  };
  const getGeneration = (key: string, id: string) => t.api.send('get', `/generations/${id}`, { headers: { Authorization: `Bearer ${key}` } });
  const sweep = () => applyPromptRetention(t.gateway.database.db, 'full', t.clock.now());

  it('a project is created with its policy (null when not given), updated, and each change is in the audit log', async () => {
    expect((await createProject()).prompt_retention).toBeNull();
    const project = await createProject('hash');
    expect(project.prompt_retention).toBe('hash');
    expect((await t.api.admin('get', `/admin/projects/${project.id}`)).body.prompt_retention).toBe('hash');
    const tightened = await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: 'none' });
    expect([tightened.status, tightened.body.prompt_retention]).toEqual([200, 'none']);
    const reset = await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: null });
    expect([reset.status, reset.body.prompt_retention]).toEqual([200, null]);
    const events = await t.api.admin('get', `/admin/audit-events?target=${project.id}&action=project.updated`);
    expect(events.body.data.map((event: { before: unknown; after: unknown }) => [event.before, event.after])).toEqual([
      [{ prompt_retention: 'none' }, { prompt_retention: null }],
      [{ prompt_retention: 'hash' }, { prompt_retention: 'none' }],
    ]);
    const invalid = await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: 'some' });
    expect([invalid.status, invalid.body.error.code]).toEqual([400, 'invalid_request']);
  });

  it("a generation shows its project, its prompt while kept and the policy; under a project's hash, the SHA-256 once settled", async () => {
    const project = await createProject('hash');
    const { id: keyId, key } = await t.createKey({ project_id: project.id });
    const prompt = 'a lighthouse only its hash remembers';

    // While queued, its worker needs it: the prompt is there, with the policy that will apply.
    const queued = await t.api.send('post', '/images/generate', {
      body: localRequest({ prompt }),
      headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' },
    });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ project_id: project.id, prompt, prompt_retention: 'hash', prompt_sha256: sha256(prompt) });

    const res = await t.api.client(key, localRequest({ prompt }));
    expect(res.status).toBe(200);
    // Settled: withheld as soon as it is read, before the sweep has reached the row, and the same after it.
    const expected = { project_id: project.id, prompt: null, prompt_sha256: sha256(prompt), prompt_retention: 'hash' };
    expect((await getGeneration(key, res.body.id)).body).toMatchObject({ status: 'succeeded', ...expected });
    expect(await sweep()).toBeGreaterThanOrEqual(1);
    expect((await getGeneration(key, res.body.id)).body).toMatchObject(expected);
    const admin = await t.api.admin('get', `/admin/generations/${res.body.id}`);
    expect(admin.body).toMatchObject({ key_id: keyId, ...expected });

    // Tightened to none: the hash goes too; loosened to full afterwards, nothing comes back.
    await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: 'none' });
    expect((await getGeneration(key, res.body.id)).body).toMatchObject({ prompt: null, prompt_sha256: null, prompt_retention: 'none' });
    await sweep();
    await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: 'full' });
    expect((await getGeneration(key, res.body.id)).body).toMatchObject({ prompt: null, prompt_sha256: null, prompt_retention: 'none' });
    const listed = await t.api.send('get', '/generations', { headers: { Authorization: `Bearer ${key}` } });
    expect(listed.body.data.find((g: { id: string }) => g.id === res.body.id)).toMatchObject({ prompt: null, prompt_retention: 'none' });
  });

  it("a key without a project follows the gateway's policy (here full): the prompt is shown; a project of its own loosens nothing withheld", async () => {
    const { key } = await t.createKey();
    const res = await t.api.client(key, localRequest({ prompt: 'kept in full' }));
    expect((await getGeneration(key, res.body.id)).body).toMatchObject({
      project_id: null,
      prompt: 'kept in full',
      prompt_sha256: null,
      prompt_retention: 'full',
    });

    const project = await createProject(null);
    const { key: inProject } = await t.createKey({ project_id: project.id });
    const own = await t.api.client(inProject, localRequest({ prompt: 'kept until the project says otherwise' }));
    expect((await getGeneration(inProject, own.body.id)).body).toMatchObject({
      project_id: project.id,
      prompt: 'kept until the project says otherwise',
      prompt_retention: 'full',
    });
    // Not swept yet under none, then loosened: nothing was withheld, so the prompt is shown again.
    await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: 'none' });
    expect((await getGeneration(inProject, own.body.id)).body).toMatchObject({ prompt: null, prompt_retention: 'none' });
    await t.api.admin('patch', `/admin/projects/${project.id}`, { prompt_retention: 'full' });
    expect((await getGeneration(inProject, own.body.id)).body).toMatchObject({ prompt: 'kept until the project says otherwise', prompt_retention: 'full' });
  });

  it("a page of several projects' generations and one of no project: each row under its own project's policy, with its own images", async () => {
    const projects = [await createProject('hash'), await createProject('none'), await createProject(null)];
    const keys = [...(await Promise.all(projects.map((project) => t.createKey({ project_id: project.id })))), await t.createKey()];
    const sent: string[] = [];
    for (const [i, { key }] of keys.entries()) {
      const res = await t.api.client(key, localRequest({ prompt: `prompt ${i}`, response_format: i % 2 === 0 ? 'url' : 'b64_json' }));
      expect(res.status).toBe(200);
      sent.push(res.body.id as string);
    }
    const page = await t.api.admin('get', `/admin/generations?limit=${sent.length}`);
    expect(page.status).toBe(200);
    const byId = new Map(page.body.data.map((generation: { id: string }) => [generation.id, generation]));
    const expected = [
      { project_id: projects[0]!.id, prompt: null, prompt_sha256: sha256('prompt 0'), prompt_retention: 'hash' },
      { project_id: projects[1]!.id, prompt: null, prompt_sha256: null, prompt_retention: 'none' },
      { project_id: projects[2]!.id, prompt: 'prompt 2', prompt_retention: 'full' },
      { project_id: null, prompt: 'prompt 3', prompt_retention: 'full' },
    ];
    expected.forEach((fields, i) => expect(byId.get(sent[i]!)).toMatchObject({ key_id: keys[i]!.id, ...fields }));
    // Stored images come back in each generation's own format: url for the even ones; a b64_json answer is not stored.
    expect(
      sent.map((id) => (byId.get(id) as { data: object[] }).data.map((image) => Object.keys(image).filter((k) => k === 'url' || k === 'b64_json'))),
    ).toEqual(sent.map((_, i) => (i % 2 === 0 ? [['url']] : [])));
  });
});
