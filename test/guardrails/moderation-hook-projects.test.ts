import { createHash } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { Webhook } from 'standardwebhooks';
import { trustOutboundCaForTests } from '../../src/shared/outbound';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { startArkGateway } from '../helpers/ark-gateway';
import { closedPort } from '../helpers/channels';
import { selfSigned } from '../helpers/self-signed-tls';
import { SpecResponses } from '../helpers/spec-responses';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';

/**
 * A project's moderation hook wired into the key paths (issue 38 §2): set on the project (its secret
 * made by the gateway and shown once, its URL checked when set), asked after the request's own checks
 * and before anything is reserved, on the native, OpenAI-compatible and asynchronous paths; a block or
 * a fail_closed failure is refused and counted as blocked, an allow (or a fail_open failure) is
 * recorded on the generation. The endpoint is a local https server with a self-signed certificate the
 * gateway's https agent is told to trust; it verifies each call's signature as an operator would.
 */
describe('project moderation hooks', () => {
  const tls = selfSigned();
  const spec = new SpecResponses('gateway');
  let t: TestGateway;
  let ark: FakeImagesApi;
  let endpoint: https.Server;
  let base: string;
  /** Each call: the path, and the payload standardwebhooks verified under `secretFor(path)` (undefined when it did not verify). */
  const received: Array<{ path: string; verified: Record<string, unknown> | undefined }> = [];
  /** The secret the endpoint verifies with, per project (by the path's `?p=` tag). */
  const secrets = new Map<string, string>();

  beforeAll(async () => {
    endpoint = https.createServer(tls, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'https://hook');
        const body = Buffer.concat(chunks).toString();
        let verified: Record<string, unknown> | undefined;
        try {
          verified = new Webhook(secrets.get(url.searchParams.get('p') ?? '') ?? '').verify(body, {
            'webhook-id': String(req.headers['webhook-id']),
            'webhook-timestamp': String(req.headers['webhook-timestamp']),
            'webhook-signature': String(req.headers['webhook-signature']),
          }) as Record<string, unknown>;
        } catch {
          // Recorded unverified.
        }
        received.push({ path: url.pathname, verified });
        if (url.pathname === '/hold') return; // never answers
        if (url.pathname === '/block') return void res.writeHead(200).end(JSON.stringify({ decision: 'block', reason: 'depicts a real person' }));
        if (url.pathname === '/error') return void res.writeHead(500).end('{}');
        res.writeHead(200).end(JSON.stringify({ decision: 'allow', reason: 'looks fine' }));
      });
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    base = `https://127.0.0.1:${(endpoint.address() as AddressInfo).port}`;
    // The gateway's outbound calls trust this run's self-signed certificate.
    trustOutboundCaForTests(tls.cert);
    // The endpoint listens on loopback: allowed as webhooks' private networks are in development.
    ({ t, ark } = await startArkGateway({ env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5' } }));
  });
  afterAll(async () => {
    await t.close();
    trustOutboundCaForTests(undefined);
    endpoint.closeAllConnections();
    await new Promise((resolve) => endpoint.close(resolve));
  });

  let tags = 0;
  /** A project with a hook at `path` of the endpoint, and a key of it; the endpoint learns the project's secret. */
  async function projectWithHook(path: string, hook: Record<string, unknown> = {}): Promise<{ projectId: string; keyId: string; key: string; tag: string }> {
    const tag = `p${++tags}`;
    const res = await t.api.admin('post', '/admin/projects', {
      name: `hooked ${tag}`,
      owner: 'o',
      credits_quota: 1000,
      quota_period_days: 30,
      moderation_hook: { url: `${base}${path}?p=${tag}`, failure_mode: 'fail_closed', ...hook },
    });
    expect(res.status).toBe(201);
    secrets.set(tag, res.body.moderation_hook.secret as string);
    const { id: keyId, key } = await t.createKey({ project_id: res.body.id, allowed_providers: ['jimeng'] });
    return { projectId: res.body.id as string, keyId, key, tag };
  }

  const generate = (key: string, prompt: string, options: { path?: string; prefer?: string } = {}) =>
    t.api.send('post', options.path ?? '/images/generate', {
      body: { prompt, model: 'jimeng-4.5' },
      headers: { Authorization: `Bearer ${key}`, ...(options.prefer ? { Prefer: options.prefer } : {}) },
    });

  const edit = async (key: string, prompt: string, image: Buffer) => {
    const res = await request(t.gateway.url)
      .post('/v1/images/edits')
      .set('Authorization', `Bearer ${key}`)
      .field('prompt', prompt)
      .field('model', 'jimeng-4.5')
      .field('size', '2048x2048')
      .attach('image', image, 'a.png');
    const problem = spec.check('post', '/v1/images/edits', res);
    if (problem) throw new Error(`Response does not match the spec: ${problem}\n${res.status} ${res.text.slice(0, 500)}`);
    return res;
  };

  const rowsOf = (keyId: string) => t.gateway.database.db.selectFrom('generations').selectAll().where('key_id', '=', keyId).execute();
  const blockedCodes = async (keyId: string) =>
    (await t.gateway.database.db.selectFrom('usage_rollups').select('error_code').where('key_id', '=', keyId).where('status', '=', 'blocked').execute()).map(
      (row) => row.error_code,
    );

  /** Nothing reserved, no row, nothing sent upstream, counted blocked under `code`; the prompt reached no log. */
  async function expectRefusedBeforeAnything(keyId: string, prompt: string, code: string): Promise<void> {
    expect(await t.api.creditsUsed(keyId)).toBe(0);
    expect(await rowsOf(keyId)).toEqual([]);
    expect(ark.requests.some((r) => r.prompt === prompt)).toBe(false);
    expect(await blockedCodes(keyId)).toContain(code);
    expect(t.logs.some((line) => line.includes(prompt))).toBe(false);
  }

  describe('the project setting', () => {
    it('is made with a whsec_ secret shown once; read back without it; audited without it', async () => {
      const created = await t.api.admin('post', '/admin/projects', {
        name: 'hooked',
        owner: 'o',
        credits_quota: 10,
        quota_period_days: 30,
        moderation_hook: { url: `${base}/allow`, failure_mode: 'fail_open' },
      });
      expect(created.status).toBe(201);
      expect(created.body.moderation_hook).toEqual({
        url: `${base}/allow`,
        timeout_ms: 2000,
        failure_mode: 'fail_open',
        previous_secret_expires_at: null,
        secret: expect.stringMatching(/^whsec_/),
      });
      const id = created.body.id as string;
      const read = await t.api.admin('get', `/admin/projects/${id}`);
      expect(read.body.moderation_hook).toEqual({ url: `${base}/allow`, timeout_ms: 2000, failure_mode: 'fail_open', previous_secret_expires_at: null });
      const listed = await t.api.admin('get', '/admin/projects?limit=100');
      expect(listed.body.data.find((p: { id: string }) => p.id === id).moderation_hook).not.toHaveProperty('secret');

      // A changed hook keeps its secret (not shown again); other changes leave it alone.
      const changed = await t.api.admin('patch', `/admin/projects/${id}`, {
        moderation_hook: { url: `${base}/block`, timeout_ms: 500, failure_mode: 'fail_closed' },
      });
      expect(changed.status).toBe(200);
      expect(changed.body.moderation_hook).toEqual({ url: `${base}/block`, timeout_ms: 500, failure_mode: 'fail_closed', previous_secret_expires_at: null });
      expect((await t.api.admin('patch', `/admin/projects/${id}`, { name: 'renamed' })).body.moderation_hook).toEqual(changed.body.moderation_hook);
      const stored = await t.gateway.database.db.selectFrom('projects').select(['moderation_hook_secret']).where('id', '=', id).executeTakeFirstOrThrow();
      expect(stored.moderation_hook_secret).not.toContain(created.body.moderation_hook.secret.slice(6)); // sealed at rest

      // Removed, then set again: a new secret, shown once.
      expect((await t.api.admin('patch', `/admin/projects/${id}`, { moderation_hook: null })).body.moderation_hook).toBeNull();
      const again = await t.api.admin('patch', `/admin/projects/${id}`, { moderation_hook: { url: `${base}/allow`, failure_mode: 'fail_open' } });
      expect(again.body.moderation_hook.secret).toMatch(/^whsec_/);
      expect(again.body.moderation_hook.secret).not.toBe(created.body.moderation_hook.secret);

      const events = await t.api.admin('get', `/admin/audit-events?target=${id}`);
      expect(events.status).toBe(200);
      expect(events.body.data.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(['project.created', 'project.updated']));
      expect(JSON.stringify(events.body)).toContain(`${base}/block`);
      expect(JSON.stringify(events.body)).not.toContain('whsec_');
    });

    it('refuses a URL that is not https, or that points at link-local or metadata addresses, when set (400 naming moderation_hook.url)', async () => {
      const project = { name: 'p', owner: 'o', credits_quota: 1, quota_period_days: 1 };
      const http = await t.api.admin('post', '/admin/projects', { ...project, moderation_hook: { url: `http://127.0.0.1:1/hook`, failure_mode: 'fail_open' } });
      expect([http.status, http.body.error.code, http.body.error.param]).toEqual([400, 'invalid_request', 'moderation_hook.url']);
      expect(http.body.error.message).toContain('must be https');
      const created = await t.api.admin('post', '/admin/projects', project);
      const metadata = await t.api.admin('patch', `/admin/projects/${created.body.id}`, {
        moderation_hook: { url: 'https://169.254.169.254/latest', failure_mode: 'fail_open' },
      });
      expect([metadata.status, metadata.body.error.code, metadata.body.error.param]).toEqual([400, 'invalid_request', 'moderation_hook.url']);
      const timeout = await t.api.admin('patch', `/admin/projects/${created.body.id}`, {
        moderation_hook: { url: `${base}/allow`, failure_mode: 'fail_open', timeout_ms: 60_000 },
      });
      expect([timeout.status, timeout.body.error.code]).toEqual([400, 'invalid_request']);
      expect((await t.api.admin('get', `/admin/projects/${created.body.id}`)).body.moderation_hook).toBeNull();
    });

    it('keeps the project operations behind admin auth', async () => {
      const hook = { url: `${base}/allow`, failure_mode: 'fail_open' };
      const create = await t.api.send('post', '/admin/projects', {
        body: { name: 'p', owner: 'o', credits_quota: 1, quota_period_days: 1, moderation_hook: hook },
      });
      expect([create.status, create.body.error.code]).toEqual([401, 'invalid_admin_secret']);
      const { projectId } = await projectWithHook('/allow');
      const update = await t.api.send('patch', `/admin/projects/${projectId}`, { body: { moderation_hook: null }, headers: { Authorization: 'Bearer wrong' } });
      expect(update.status).toBe(401);
      expect((await t.api.admin('get', `/admin/projects/${projectId}`)).body.moderation_hook).not.toBeNull();
    });

    const rotate = (projectId: string, body?: unknown, headers?: Record<string, string>) =>
      t.api.send('post', `/admin/projects/${projectId}/moderation-hook/rotate-secret`, {
        body,
        headers: headers ?? { Authorization: `Bearer ${ADMIN_SECRET}` },
      });
    /** Whether each hook call of one generation verified under the secret the endpoint holds now. */
    const verifiedCalls = async (key: string, prompt: string) => {
      const from = received.length;
      expect((await generate(key, prompt)).status).toBe(200);
      return received.slice(from).map((call) => call.verified !== undefined);
    };

    it('rotates the secret: the new one shown once, both signing during the overlap, the old one stopped after it; audited without either', async () => {
      const { projectId, key, tag } = await projectWithHook('/allow');
      const first = secrets.get(tag) as string;
      const rotatedFrom = t.clock.now();
      const rotated = await rotate(projectId, { overlap_seconds: 3600 });
      const rotatedBy = t.clock.now();
      expect(rotated.status).toBe(200);
      const second = rotated.body.moderation_hook.secret as string;
      expect([second.startsWith('whsec_'), second === first]).toEqual([true, false]);
      const overlapEnd = rotated.body.moderation_hook.previous_secret_expires_at as string;
      expect(Date.parse(overlapEnd) - 3_600_000).toBeGreaterThanOrEqual(rotatedFrom);
      expect(Date.parse(overlapEnd) - 3_600_000).toBeLessThanOrEqual(rotatedBy);
      const read = await t.api.admin('get', `/admin/projects/${projectId}`);
      expect(read.body.moderation_hook).toEqual({
        url: `${base}/allow?p=${tag}`,
        timeout_ms: 2000,
        failure_mode: 'fail_closed',
        previous_secret_expires_at: overlapEnd,
      });

      // The endpoint still holds the old secret, then switches to the new one: each call verifies.
      expect(await verifiedCalls(key, 'signed under both, checked with the old')).toEqual([true]);
      secrets.set(tag, second);
      expect(await verifiedCalls(key, 'signed under both, checked with the new')).toEqual([true]);

      // Rotated again without an overlap: the secret just replaced signs no more; the newest does.
      const third = (await rotate(projectId, { overlap_seconds: 0 })).body.moderation_hook;
      expect(third.previous_secret_expires_at).toBeNull();
      expect(await verifiedCalls(key, 'signed under the newest only, checked with the one before')).toEqual([false]);
      secrets.set(tag, third.secret as string);
      expect(await verifiedCalls(key, 'signed under the newest only, checked with it')).toEqual([true]);

      const events = await t.api.admin('get', `/admin/audit-events?target=${projectId}&action=project.moderation_hook_secret_rotated`);
      expect(events.body.data.map((event: { before: unknown; after: unknown }) => [event.before, event.after])).toEqual([
        [{ overlap_ends_at: overlapEnd }, { overlap_ends_at: null, secret: '[redacted]' }],
        [{ overlap_ends_at: null }, { overlap_ends_at: overlapEnd, secret: '[redacted]' }],
      ]);
      expect(JSON.stringify(events.body)).not.toContain('whsec_');
    });

    it('the old secret stops signing when the overlap ends, for a key already cached; a change of the hook during it keeps both', async () => {
      const { projectId, key, tag } = await projectWithHook('/allow');
      const second = (await rotate(projectId, { overlap_seconds: 10 })).body.moderation_hook.secret as string;
      const changed = await t.api.admin('patch', `/admin/projects/${projectId}`, {
        moderation_hook: { url: `${base}/allow?p=${tag}`, failure_mode: 'fail_closed', timeout_ms: 3000 },
      });
      expect([changed.body.moderation_hook.timeout_ms, changed.body.moderation_hook.previous_secret_expires_at]).toEqual([3000, expect.any(String)]);
      // The endpoint holds the first secret; this request caches the key with the project's hook.
      expect(await verifiedCalls(key, 'in the overlap, checked with the first')).toEqual([true]);
      t.clock.advanceMs(11_000);
      expect(await verifiedCalls(key, 'after the overlap, checked with the first')).toEqual([false]);
      secrets.set(tag, second);
      expect(await verifiedCalls(key, 'after the overlap, checked with the second')).toEqual([true]);
      expect((await t.api.admin('get', `/admin/projects/${projectId}`)).body.moderation_hook.previous_secret_expires_at).toBeNull();
    });

    it('a hook removed and set again starts without an overlap; the sealed old secret goes with it', async () => {
      const { projectId, tag } = await projectWithHook('/allow');
      await rotate(projectId);
      expect((await t.api.admin('patch', `/admin/projects/${projectId}`, { moderation_hook: null })).status).toBe(200);
      const row = await t.gateway.database.db
        .selectFrom('projects')
        .select(['moderation_hook_previous_secret', 'moderation_hook_previous_secret_expires_at'])
        .where('id', '=', projectId)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ moderation_hook_previous_secret: null, moderation_hook_previous_secret_expires_at: null });
      const again = await t.api.admin('patch', `/admin/projects/${projectId}`, {
        moderation_hook: { url: `${base}/allow?p=${tag}`, failure_mode: 'fail_open' },
      });
      expect(again.body.moderation_hook.previous_secret_expires_at).toBeNull();
    });

    it('refuses a rotation: 404 for an unknown project or one without a hook, 400 for a bad overlap, 401 without admin auth', async () => {
      const missing = await rotate('prj_missing');
      expect([missing.status, missing.body.error.code]).toEqual([404, 'project_not_found']);
      const bare = await t.api.admin('post', '/admin/projects', { name: 'no hook', owner: 'o', credits_quota: 1, quota_period_days: 1 });
      const noHook = await rotate(bare.body.id as string);
      expect([noHook.status, noHook.body.error.code, noHook.body.error.param]).toEqual([404, 'moderation_hook_not_found', 'id']);
      const { projectId } = await projectWithHook('/allow');
      const before = (await t.api.admin('get', `/admin/projects/${projectId}`)).body;
      for (const overlap of [-1, 604_801, 'soon']) {
        const bad = await rotate(projectId, { overlap_seconds: overlap });
        expect([bad.status, bad.body.error.code]).toEqual([400, 'invalid_request']);
      }
      const unauthenticated = await rotate(projectId, {}, {});
      expect([unauthenticated.status, unauthenticated.body.error.code]).toEqual([401, 'invalid_admin_secret']);
      expect((await t.api.admin('get', `/admin/projects/${projectId}`)).body).toEqual(before);
    });
  });

  describe('on the generation paths', () => {
    it('allow: the signed call carries the prompt, model, key and project; the decision and latency are recorded on the generation', async () => {
      const { projectId, keyId, key } = await projectWithHook('/allow');
      const res = await generate(key, 'a lighthouse at dusk');
      expect(res.status).toBe(200);
      const call = received.at(-1)!;
      expect(call.verified).toEqual({ prompt: 'a lighthouse at dusk', input_images: [], model: 'jimeng-4.5', key_id: keyId, project_id: projectId });
      const read = await t.api.send('get', `/generations/${res.body.id}`, { headers: { Authorization: `Bearer ${key}` } });
      expect(read.body.moderation).toEqual({ decision: 'allow', latency_ms: expect.any(Number), failed_open: false, reason: 'looks fine' });
      const admin = await t.api.admin('get', `/admin/generations/${res.body.id}`);
      expect(admin.body.moderation).toEqual({ ...read.body.moderation, failure: null });
      const internal = await t.internal.service('get', `/api/v1/creative/generations/${res.body.id}`);
      expect(internal.body.moderation).toEqual(admin.body.moderation);
    });

    it('block: 400 moderation_blocked with the reason, never the prompt; nothing reserved or sent; counted blocked', async () => {
      const { keyId, key } = await projectWithHook('/block');
      const prompt = 'a portrait of someone famous';
      const res = await generate(key, prompt);
      expect([res.status, res.body.error.code, res.body.error.param]).toEqual([400, 'moderation_blocked', 'prompt']);
      expect(res.body.error.message).toContain('depicts a real person');
      expect(res.body.error.message).not.toContain(prompt);
      await expectRefusedBeforeAnything(keyId, prompt, 'moderation_blocked');
    });

    it('down, fail_open: the request goes on, recorded as failed open (why, for operators only)', async () => {
      // A project whose hook points at a port nothing listens on.
      const down = await t.api.admin('post', '/admin/projects', {
        name: 'down',
        owner: 'o',
        credits_quota: 100,
        quota_period_days: 30,
        moderation_hook: { url: `https://127.0.0.1:${await closedPort()}/hook`, failure_mode: 'fail_open' },
      });
      const { key: downKey } = await t.createKey({ project_id: down.body.id, allowed_providers: ['jimeng'] });
      const res = await generate(downKey, 'a quiet harbour');
      expect(res.status).toBe(200);
      const read = await t.api.send('get', `/generations/${res.body.id}`, { headers: { Authorization: `Bearer ${downKey}` } });
      expect(read.body.moderation).toEqual({ decision: 'allow', latency_ms: expect.any(Number), failed_open: true, reason: null });
      const admin = await t.api.admin('get', `/admin/generations/${res.body.id}`);
      expect(admin.body.moderation.failure).toContain('could not be reached');
      expect(t.logs.some((line) => line.includes('fails open') && line.includes(down.body.id))).toBe(true);
      expect(t.logs.some((line) => line.includes('a quiet harbour'))).toBe(false);
    });

    it('down, fail_closed: 503 moderation_unavailable; nothing reserved or sent; counted blocked', async () => {
      const down = await t.api.admin('post', '/admin/projects', {
        name: 'down closed',
        owner: 'o',
        credits_quota: 100,
        quota_period_days: 30,
        moderation_hook: { url: `https://127.0.0.1:${await closedPort()}/hook`, failure_mode: 'fail_closed' },
      });
      const { id: keyId, key } = await t.createKey({ project_id: down.body.id, allowed_providers: ['jimeng'] });
      const res = await generate(key, 'a windmill in fog');
      expect([res.status, res.body.error.code]).toEqual([503, 'moderation_unavailable']);
      expect(res.body.error.message).not.toContain('127.0.0.1');
      await expectRefusedBeforeAnything(keyId, 'a windmill in fog', 'moderation_unavailable');
    });

    it('an answer that is not a decision is a failure too (fail_closed: 503)', async () => {
      const { keyId, key } = await projectWithHook('/error');
      const res = await generate(key, 'a red kite');
      expect([res.status, res.body.error.code]).toEqual([503, 'moderation_unavailable']);
      await expectRefusedBeforeAnything(keyId, 'a red kite', 'moderation_unavailable');
    });

    it('slow beyond its timeout: fail_closed refuses, fail_open goes on, each within the deadline', async () => {
      const closed = await projectWithHook('/hold', { timeout_ms: 300 });
      const started = Date.now();
      const refused = await generate(closed.key, 'a slow answer');
      expect([refused.status, refused.body.error.code]).toEqual([503, 'moderation_unavailable']);
      expect(Date.now() - started).toBeLessThan(5000);
      await expectRefusedBeforeAnything(closed.keyId, 'a slow answer', 'moderation_unavailable');

      const open = await projectWithHook('/hold', { timeout_ms: 300, failure_mode: 'fail_open' });
      const res = await generate(open.key, 'a slow answer, open');
      expect(res.status).toBe(200);
      const admin = await t.api.admin('get', `/admin/generations/${res.body.id}`);
      expect(admin.body.moderation).toMatchObject({ decision: 'allow', failed_open: true, failure: 'the hook did not answer within 300 ms' });
      expect(admin.body.moderation.latency_ms).toBeGreaterThanOrEqual(290);
    });

    it('the OpenAI-compatible generations and edits are moderated too; an edit sends its input image by SHA-256', async () => {
      const blocked = await projectWithHook('/block');
      const generations = await generate(blocked.key, 'openai blocked', { path: '/v1/images/generations' });
      expect([generations.status, generations.body.error.code]).toEqual([400, 'moderation_blocked']);
      const image = testPng(16, 16);
      const edited = await edit(blocked.key, 'edit blocked', image);
      expect([edited.status, edited.body.error.code]).toEqual([400, 'moderation_blocked']);
      expect(received.at(-1)!.verified).toMatchObject({ prompt: 'edit blocked', input_images: [{ sha256: createHash('sha256').update(image).digest('hex') }] });
      await expectRefusedBeforeAnything(blocked.keyId, 'edit blocked', 'moderation_blocked');

      const allowed = await projectWithHook('/allow');
      expect((await generate(allowed.key, 'openai allowed', { path: '/v1/images/generations' })).status).toBe(200);
      expect((await edit(allowed.key, 'edit allowed', image)).status).toBe(200);
      const rows = await rowsOf(allowed.keyId);
      expect(rows.map((row) => row.moderation_decision)).toEqual(['allow', 'allow']);
    });

    it('asynchronous: decided at admission; a blocked request is never queued, an allowed one carries the decision', async () => {
      const blocked = await projectWithHook('/block');
      const refused = await generate(blocked.key, 'async blocked', { prefer: 'respond-async' });
      expect([refused.status, refused.body.error.code]).toEqual([400, 'moderation_blocked']);
      await expectRefusedBeforeAnything(blocked.keyId, 'async blocked', 'moderation_blocked');

      const allowed = await projectWithHook('/allow');
      const queued = await generate(allowed.key, 'async allowed', { prefer: 'respond-async' });
      expect(queued.status).toBe(202);
      expect(queued.body.moderation).toEqual({ decision: 'allow', latency_ms: expect.any(Number), failed_open: false, reason: 'looks fine' });
    });

    it('keys without a project, and projects without a hook, call nothing', async () => {
      const before = received.length;
      const { key: alone } = await t.createKey({ allowed_providers: ['jimeng'] });
      const plain = await t.api.admin('post', '/admin/projects', { name: 'plain', owner: 'o', credits_quota: 100, quota_period_days: 30 });
      expect(plain.body.moderation_hook).toBeNull();
      const { key: inPlain } = await t.createKey({ project_id: plain.body.id, allowed_providers: ['jimeng'] });
      for (const key of [alone, inPlain]) {
        const res = await generate(key, 'no hook here');
        expect(res.status).toBe(200);
        const read = await t.api.send('get', `/generations/${res.body.id}`, { headers: { Authorization: `Bearer ${key}` } });
        expect(read.body.moderation).toBeNull();
      }
      expect(received.length).toBe(before);
    });
  });
  describe('the secret at rest, across gateways on one database (CHANNEL_SEALING_KEY)', () => {
    const OLD_KEY = '33'.repeat(32);
    const NEW_KEY = '44'.repeat(32);
    const sealedWith = (hex: string) => `v1.${createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex').slice(0, 8)}.`;
    let database: ThrowawayDatabase;
    let g: TestGateway | undefined;
    const env = (sealingKey: string) => ({ DATABASE_URL: database.url, CHANNEL_SEALING_KEY: sealingKey, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    const storedSecret = async (gateway: TestGateway, id: string) =>
      (await gateway.gateway.database.db.selectFrom('projects').select('moderation_hook_secret').where('id', '=', id).executeTakeFirstOrThrow())
        .moderation_hook_secret as string;

    beforeAll(async () => {
      database = await createThrowawayDatabase();
    });
    afterEach(async () => {
      await g?.close();
      g = undefined;
    });
    afterAll(() => database.drop());

    it('is resealed with the newest key at startup and still signs; one sealed with a key no longer configured fails as the mode says', async () => {
      g = await startTestGateway(env(OLD_KEY));
      const tag = `p${++tags}`;
      const hook = (mode: string) => ({ url: `${base}/allow?p=${tag}`, failure_mode: mode });
      const created = await g.api.admin('post', '/admin/projects', {
        name: 'sealed',
        owner: 'o',
        credits_quota: 100,
        quota_period_days: 30,
        moderation_hook: hook('fail_closed'),
      });
      const projectId = created.body.id as string;
      secrets.set(tag, created.body.moderation_hook.secret as string);
      const { key } = await g.createKey({ project_id: projectId });
      // Rotated, the endpoint still on the first secret: it verifies only the old secret's signature.
      expect((await g.api.admin('post', `/admin/projects/${projectId}/moderation-hook/rotate-secret`, { overlap_seconds: 3600 })).status).toBe(200);
      const storedPrevious = async (gateway: TestGateway) =>
        (
          await gateway.gateway.database.db
            .selectFrom('projects')
            .select('moderation_hook_previous_secret')
            .where('id', '=', projectId)
            .executeTakeFirstOrThrow()
        ).moderation_hook_previous_secret as string;
      expect((await storedSecret(g, projectId)).startsWith(sealedWith(OLD_KEY))).toBe(true);
      expect((await storedPrevious(g)).startsWith(sealedWith(OLD_KEY))).toBe(true);
      await g.close();

      g = await startTestGateway(env(`${NEW_KEY},${OLD_KEY}`));
      expect((await storedSecret(g, projectId)).startsWith(sealedWith(NEW_KEY))).toBe(true);
      expect((await storedPrevious(g)).startsWith(sealedWith(NEW_KEY))).toBe(true);
      expect((await g.api.client(key, localRequest({ prompt: 'after the reseal' }))).status).toBe(200);
      expect(received.at(-1)).toMatchObject({ path: '/allow', verified: { prompt: 'after the reseal', project_id: projectId } });
      await g.close();

      // Sealed with a key this gateway does not have: never sent unsigned; fail_closed refuses, fail_open goes on.
      g = await startTestGateway(env(OLD_KEY));
      const before = received.length;
      const refused = await g.api.client(key, localRequest({ prompt: 'cannot sign' }));
      expect([refused.status, refused.body.error.code]).toEqual([503, 'moderation_unavailable']);
      expect((await g.api.admin('patch', `/admin/projects/${projectId}`, { moderation_hook: hook('fail_open') })).status).toBe(200);
      const allowed = await g.api.client(key, localRequest({ prompt: 'cannot sign, open' }));
      expect(allowed.status).toBe(200);
      expect((await g.api.admin('get', `/admin/generations/${allowed.body.id}`)).body.moderation).toMatchObject({
        failed_open: true,
        failure: "the hook's secret cannot be opened (sealing key not configured)",
      });
      expect(received.length).toBe(before);
    });
  });
});
