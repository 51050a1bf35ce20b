import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { asciiSafeBmp, claimedPng, dataUri, type MultipartPart, multipartBody, testPng } from '../helpers/test-images';
import { closeClient, exchange } from './http-client';
import { type ConformanceTarget, type Json, conformanceTarget } from './target';

const PRISM = path.resolve(__dirname, '../../node_modules/@stoplight/prism-cli/dist/index.js');

/**
 * Prism (Stoplight) in proxy mode in front of the gateway process, one per served document:
 * scripted traffic covers every operation's success and every documented error status that a
 * client can provoke, and any `sl-violations` entry about a response fails the stage. Request
 * violations are expected (the error cases send bad requests on purpose). Before trusting a
 * clean result, the stage shows that Prism does report a planted response violation.
 */

/** Statuses no scripted client can provoke: a gateway bug (500), a dead database (readiness 503). */
const UNPROVOKABLE = new Set(['500', 'getReadiness 503', 'getInternalReadiness 503']);

/**
 * Not scripted yet (issue #12 follow-up): stored images (getImage needs a stored generation's
 * signed URL) and the channel operations (they need upstream accounts); the 408 every body-taking
 * operation documents (a body that never finishes: test/http/slow-bodies.test.ts provokes it) and
 * the 503 of the admin and internal operations (dependency_unavailable / access_jwks_unavailable
 * need a dependency taken away: test/dependencies does that). Their responses still pass through
 * the fuzz and contract tests; this list only keeps the coverage check honest about what the script
 * itself does not send. Each run prints it.
 */
const NOT_YET_SCRIPTED_OPERATIONS = new Set(['getImage', 'createChannel', 'listChannels', 'getChannel', 'updateChannel', 'deleteChannel', 'testChannel']);
const NOT_YET_SCRIPTED_STATUSES = new Set(['408', '503']);
/**
 * Asynchronous generations (issue #17): Prefer: respond-async (202) and the generation resources.
 * Covered by test/generation/async-generations.test.ts (responses checked against the spec there);
 * not scripted through Prism yet. Pairs, since the creative API has operations of the same names.
 */
const NOT_YET_SCRIPTED_PAIRS = new Set([
  'generateImage 202',
  'createImageOpenAI 202',
  'editImageOpenAI 202',
  // Edits provoke provider failures only on a model with inputs behind the fake upstream (the
  // upstream side's input limits, issue #27); covered on local-1 by test/generation/openai-edits.test.ts.
  'editImageOpenAI 409',
  'editImageOpenAI 502',
  'editImageOpenAI 503',
  'editImageOpenAI 504',
  'listGenerations 200',
  'listGenerations 400',
  'listGenerations 401',
  'listGenerations 403',
  'getGeneration 200',
  'getGeneration 400',
  'getGeneration 401',
  'getGeneration 403',
  'getGeneration 404',
  'cancelGeneration 200',
  'cancelGeneration 400',
  'cancelGeneration 401',
  'cancelGeneration 403',
  'cancelGeneration 404',
  'cancelGeneration 409',
]);

interface Violation {
  location: string[];
  severity: string;
  message: string;
}

async function startPrism(document: string, upstream: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [PRISM, 'proxy', document, upstream, '--port', '0', '--host', '127.0.0.1', '--errors=false'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Prism did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Prism is listening on (http:\/\/[\d.]+:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1]!, child });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`Prism exited with ${code}:\n${output}`)));
  });
}

/** Forwards to the gateway, except that a request marked `X-Conformance-Plant` gets an answer the spec does not allow. */
async function startTap(upstream: string): Promise<{ url: string; server: http.Server }> {
  const target = new URL(upstream);
  const server = http.createServer((req, res) => {
    if (req.headers['x-conformance-plant']) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'X-Request-Id': 'planted' });
      res.end(JSON.stringify({ status: 'on fire', extra: true }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      // The gateway refuses an oversize body (413) as soon as it has the headers and closes the
      // connection; writing the rest of the body can then fail (EPIPE, ECONNRESET) before the answer
      // is read. The refusal does nothing, so it is asked once more; a second failure is a 502 here.
      const send = (attempt: number) => {
        const forward = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        forward.on('error', (error: NodeJS.ErrnoException) => {
          if (res.headersSent) return;
          if (attempt === 0 && (error.code === 'EPIPE' || error.code === 'ECONNRESET')) return send(1);
          res.writeHead(502, { 'Content-Type': 'text/plain' });
          res.end(`conformance tap: ${error.message}`);
        });
        forward.end(body);
      };
      send(0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('conformance: Prism proxy in front of the gateway process', () => {
  let target: ConformanceTarget;
  let tap: { url: string; server: http.Server };
  const prism: Record<'gateway' | 'creative', { url: string; child: ChildProcess } | undefined> = { gateway: undefined, creative: undefined };
  const responseViolations: string[] = [];
  let requestViolations = 0;
  let sent = 0;
  const covered = new Set<string>();

  beforeAll(async () => {
    target = await conformanceTarget();
    tap = await startTap(target.gatewayUrl);
    [prism.gateway, prism.creative] = await Promise.all([startPrism(target.files.gateway, tap.url), startPrism(target.files.creative, target.internalUrl)]);
  }, 120_000);
  afterAll(async () => {
    for (const p of Object.values(prism)) p?.child.kill();
    tap?.server.close();
    closeClient();
    await target?.close();
  });

  /** One request through Prism; records its violations and the (operation, status) it covers. */
  async function call(
    api: 'gateway' | 'creative',
    operationId: string,
    expected: number,
    request: { method: string; path: string; headers?: Record<string, string>; body?: unknown; raw?: string | Buffer },
  ) {
    const body = request.raw ?? (request.body === undefined ? undefined : JSON.stringify(request.body));
    const headers: Record<string, string> = {
      ...(body !== undefined && !request.headers?.['Content-Type'] ? { 'Content-Type': 'application/json' } : {}),
      ...request.headers,
    };
    const res = await exchange(prism[api]!.url, { method: request.method, path: request.path, headers, body });
    sent += 1;
    const violations = JSON.parse(String(res.headers['sl-violations'] ?? '[]')) as Violation[];
    for (const v of violations) {
      if (v.location[0] === 'request') requestViolations += 1;
      else responseViolations.push(`${operationId} ${res.status}: ${v.location.join('.')}: ${v.message}`);
    }
    expect({ operationId, status: res.status, body: res.status === expected ? '' : res.text.slice(0, 300) }).toEqual({
      operationId,
      status: expected,
      body: '',
    });
    covered.add(`${operationId} ${expected}`);
    return res;
  }

  it('reports a planted response violation (so a clean run means something)', async () => {
    const res = await exchange(prism.gateway!.url, { method: 'GET', path: '/healthz', headers: { 'X-Conformance-Plant': '1' } });
    const violations = JSON.parse(String(res.headers['sl-violations'] ?? '[]')) as Violation[];
    expect(violations.filter((v) => v.location[0] === 'response').length).toBeGreaterThan(0);
  });

  it('public API: every operation, its success and each documented error status, 0 response violations', async () => {
    const admin = { Authorization: `Bearer ${target.adminSecret}` };
    const createKey = async (overrides: Json) => {
      const res = await call('gateway', 'createKey', 201, {
        method: 'POST',
        path: '/admin/keys',
        headers: admin,
        body: {
          name: 'prism',
          owner: 'prism@example.com',
          credits_quota: 1000,
          quota_period_days: 30,
          rate_limit_rpm: 1000,
          allowed_providers: ['local', 'jimeng'],
          ...overrides,
        },
      });
      const key = JSON.parse(res.text) as { id: string; key: string };
      return { id: key.id, auth: { Authorization: `Bearer ${key.key}` } };
    };
    const main = await createKey({});
    const localOnly = await createKey({ allowed_providers: ['local'] });
    const broke = await createKey({ credits_quota: 0 });
    const big = 'x'.repeat(70_000);

    for (const [operationId, route] of [
      ['generateImage', '/images/generate'],
      ['createImageOpenAI', '/v1/images/generations'],
    ] as const) {
      const generate = (expected: number, body: unknown, headers: Record<string, string> = main.auth, raw?: string) =>
        call('gateway', operationId, expected, { method: 'POST', path: route, headers, body, raw });
      const local = { prompt: 'a lighthouse', model: 'local-1', size: '32x32', response_format: 'b64_json' };
      await generate(200, local);
      await generate(400, { model: 'local-1' });
      await generate(401, local, {});
      await generate(402, local, broke.auth);
      await generate(403, { ...local, model: 'jimeng-4.0' }, localOnly.auth);
      await generate(404, { ...local, model: 'no-such-model' });
      // Both take a 72 MiB body (a prompt past its model's limit is 400): generateImage's 413s are its inputs'
      // (a pixel bomb by its header); createImageOpenAI's a body past the 72 MiB.
      await generate(400, { ...local, prompt: big });
      await generate(
        413,
        operationId === 'generateImage' ? { ...local, images: [dataUri(claimedPng(9000, 9000))] } : { ...local, prompt: 'x'.repeat(73 * 1024 * 1024) },
      );
      if (operationId === 'generateImage') {
        await generate(400, { ...local, images: [dataUri(Buffer.from('not an image'))] });
        await generate(404, { ...local, images: ['img_notStoredAnywhere0'] });
        await generate(422, { ...local, images: ['https://127.0.0.1/a.png'] });
      }
      await generate(415, undefined, { ...main.auth, 'Content-Type': 'text/plain' }, 'hello');
      await generate(200, local, { ...main.auth, 'Idempotency-Key': `${operationId}-reused` });
      await generate(422, { ...local, prompt: 'another' }, { ...main.auth, 'Idempotency-Key': `${operationId}-reused` });
      const slowLimit = await createKey({ rate_limit_rpm: 1 });
      await generate(200, local, slowLimit.auth);
      await generate(429, local, slowLimit.auth);
      // Provider failures are provoked through the local fake upstream (not against a remote deployment).
      if (!target.local) continue;
      await generate(400, { prompt: 'refuse me [code:50411]', model: 'jimeng-4.0' });
      await generate(422, { prompt: 'withhold [post-code:50511]', model: 'jimeng-4.0' });
      await generate(502, { prompt: 'nonsense [garbage]', model: 'jimeng-4.0' });
      await generate(503, { prompt: 'no credentials', model: 'jimeng-4.5' });
      await generate(503, { prompt: `busy [busy:9] ${operationId}`, model: 'jimeng-4.0' });
      await generate(504, { prompt: 'too slow [slow:3000]', model: 'jimeng-4.0' });
      // 409: a retry while the first request (held up at the fake upstream) still runs.
      const prompt = `in use [slow:1500] ${operationId}`;
      const first = generate(200, { prompt, model: 'jimeng-4.0' }, { ...main.auth, 'Idempotency-Key': `${operationId}-in-use` });
      for (let i = 0; i < 200 && !target.visual?.requests.some((r) => JSON.stringify(r.body).includes(prompt)); i++)
        await new Promise((r) => setTimeout(r, 10));
      await generate(409, { prompt, model: 'jimeng-4.0' }, { ...main.auth, 'Idempotency-Key': `${operationId}-in-use` });
      await first;
    }

    // OpenAI edits: multipart bodies. Prism's proxy carries bodies as text, so the files are BMPs
    // whose bytes are all ASCII (a PNG's are not); the mask (PNG with alpha) is left to
    // test/generation/openai-edits.test.ts.
    {
      const edit = (expected: number, parts: MultipartPart[], headers: Record<string, string> = main.auth) => {
        const { body, contentType } = multipartBody(parts);
        return call('gateway', 'editImageOpenAI', expected, {
          method: 'POST',
          path: '/v1/images/edits',
          headers: { ...headers, 'Content-Type': contentType },
          raw: body,
        });
      };
      const image = (bytes: Buffer = asciiSafeBmp(16, 16), name = 'image') => ({ name, filename: 'a.bmp', bytes, type: 'image/bmp' });
      const fields = (overrides: Record<string, string> = {}) =>
        Object.entries({ prompt: 'edit me', model: 'local-1', size: '32x32', response_format: 'b64_json', ...overrides }).map(([name, value]) => ({
          name,
          value,
        }));
      await edit(200, [...fields(), image()]);
      await edit(200, [...fields({ n: '2' }), image(asciiSafeBmp(16, 16), 'image[]'), image(asciiSafeBmp(4, 4), 'image[]')]);
      await edit(400, [...fields(), image(Buffer.from('not an image'))]);
      await edit(400, fields());
      await edit(401, [...fields(), image()], {});
      await edit(402, [...fields(), image()], broke.auth);
      await edit(403, [...fields({ model: 'jimeng-4.0' }), image()], localOnly.auth);
      await edit(404, [...fields({ model: 'no-such-model' }), image()]);
      await edit(413, [...fields(), image(asciiSafeBmp(9000, 9000))]);
      await call('gateway', 'editImageOpenAI', 415, {
        method: 'POST',
        path: '/v1/images/edits',
        headers: { ...main.auth, 'Content-Type': 'application/json' },
        raw: JSON.stringify({ prompt: 'p', model: 'local-1' }),
      });
      await edit(200, [...fields(), image()], { ...main.auth, 'Idempotency-Key': 'editImageOpenAI-reused' });
      await edit(422, [...fields(), image(asciiSafeBmp(10, 10))], { ...main.auth, 'Idempotency-Key': 'editImageOpenAI-reused' });
      const slowLimit = await createKey({ rate_limit_rpm: 1 });
      await edit(200, [...fields(), image()], slowLimit.auth);
      await edit(429, [...fields(), image()], slowLimit.auth);
    }

    const keyPath = `/admin/keys/${main.id}`;
    await call('gateway', 'createKey', 400, { method: 'POST', path: '/admin/keys', headers: admin, body: { name: 'x' } });
    await call('gateway', 'createKey', 401, { method: 'POST', path: '/admin/keys', body: {} });
    await call('gateway', 'createKey', 413, { method: 'POST', path: '/admin/keys', headers: admin, body: { name: big } });
    await call('gateway', 'createKey', 415, { method: 'POST', path: '/admin/keys', headers: { ...admin, 'Content-Type': 'text/plain' }, raw: 'x' });
    const keyBody = { name: 'idem', owner: 'o', credits_quota: 1, quota_period_days: 1, allowed_providers: ['local'] };
    await call('gateway', 'createKey', 201, { method: 'POST', path: '/admin/keys', headers: { ...admin, 'Idempotency-Key': 'ck-1' }, body: keyBody });
    await call('gateway', 'createKey', 201, { method: 'POST', path: '/admin/keys', headers: { ...admin, 'Idempotency-Key': 'ck-1' }, body: keyBody });
    await call('gateway', 'createKey', 422, {
      method: 'POST',
      path: '/admin/keys',
      headers: { ...admin, 'Idempotency-Key': 'ck-1' },
      body: { ...keyBody, name: 'other' },
    });
    await call('gateway', 'listKeys', 200, { method: 'GET', path: '/admin/keys?limit=2&owner=prism@example.com', headers: admin });
    await call('gateway', 'listKeys', 400, { method: 'GET', path: '/admin/keys?limit=Infinity', headers: admin });
    await call('gateway', 'listKeys', 401, { method: 'GET', path: '/admin/keys' });
    for (const [operationId, method, suffix, body, status200] of [
      ['getKey', 'GET', '', undefined, 200],
      ['updateKey', 'PATCH', '', { rate_limit_rpm: 1000 }, 200],
      ['setKeyQuota', 'POST', '/quota', { credits_quota: 1000 }, 200],
      ['rotateKey', 'POST', '/rotate', undefined, 200],
      ['disableKey', 'DELETE', '', undefined, 200],
    ] as const) {
      await call('gateway', operationId, status200, { method, path: `${keyPath}${suffix}`, headers: admin, body });
      await call('gateway', operationId, 400, { method, path: `/admin/keys/bad-id${suffix}`, headers: admin, body });
      await call('gateway', operationId, 401, { method, path: `${keyPath}${suffix}`, body });
      await call('gateway', operationId, 404, { method, path: `/admin/keys/key_missing${suffix}`, headers: admin, body });
      if (body) {
        await call('gateway', operationId, 413, { method, path: `${keyPath}${suffix}`, headers: admin, body: { name: big } });
        await call('gateway', operationId, 415, { method, path: `${keyPath}${suffix}`, headers: { ...admin, 'Content-Type': 'text/plain' }, raw: 'x' });
      }
    }
    // 403 insufficient_scope: scoped admin tokens lacking the operation's scope (keysReader for every
    // other scope; auditor for keys:read).
    const createToken = async (scopes: string[]) => {
      const res = await call('gateway', 'createAdminToken', 201, {
        method: 'POST',
        path: '/admin/tokens',
        headers: admin,
        body: { name: `prism ${scopes.join(' ')}`, scopes },
      });
      const token = JSON.parse(res.text) as { id: string; token: string };
      return { id: token.id, auth: { Authorization: `Bearer ${token.token}` } };
    };
    const keysReader = await createToken(['keys:read']);
    const auditor = await createToken(['audit:read']);
    await call('gateway', 'createKey', 403, { method: 'POST', path: '/admin/keys', headers: keysReader.auth, body: keyBody });
    await call('gateway', 'listKeys', 403, { method: 'GET', path: '/admin/keys', headers: auditor.auth });
    for (const [operationId, method, suffix, body] of [
      ['getKey', 'GET', '', undefined],
      ['updateKey', 'PATCH', '', { rate_limit_rpm: 1000 }],
      ['setKeyQuota', 'POST', '/quota', { credits_quota: 1000 }],
      ['rotateKey', 'POST', '/rotate', undefined],
      ['disableKey', 'DELETE', '', undefined],
    ] as const) {
      await call('gateway', operationId, 403, {
        method,
        path: `${keyPath}${suffix}`,
        headers: operationId === 'getKey' ? auditor.auth : keysReader.auth,
        body,
      });
    }

    // Projects (issue #38): the same shape as keys; keysReader holds no projects scope.
    const projectBody = { name: 'prism', owner: 'prism@example.com', credits_quota: 1000, quota_period_days: 30 };
    const project = JSON.parse(
      (await call('gateway', 'createProject', 201, { method: 'POST', path: '/admin/projects', headers: admin, body: projectBody })).text,
    ) as { id: string };
    await call('gateway', 'createProject', 400, { method: 'POST', path: '/admin/projects', headers: admin, body: { name: 'x' } });
    await call('gateway', 'createProject', 401, { method: 'POST', path: '/admin/projects', body: projectBody });
    await call('gateway', 'createProject', 403, { method: 'POST', path: '/admin/projects', headers: keysReader.auth, body: projectBody });
    await call('gateway', 'createProject', 413, { method: 'POST', path: '/admin/projects', headers: admin, body: { name: big } });
    await call('gateway', 'createProject', 415, { method: 'POST', path: '/admin/projects', headers: { ...admin, 'Content-Type': 'text/plain' }, raw: 'x' });
    await call('gateway', 'createProject', 201, {
      method: 'POST',
      path: '/admin/projects',
      headers: { ...admin, 'Idempotency-Key': 'cp-1' },
      body: projectBody,
    });
    await call('gateway', 'createProject', 422, {
      method: 'POST',
      path: '/admin/projects',
      headers: { ...admin, 'Idempotency-Key': 'cp-1' },
      body: { ...projectBody, name: 'other' },
    });
    await call('gateway', 'listProjects', 200, { method: 'GET', path: '/admin/projects?limit=2&owner=prism@example.com', headers: admin });
    await call('gateway', 'listProjects', 400, { method: 'GET', path: '/admin/projects?limit=Infinity', headers: admin });
    await call('gateway', 'listProjects', 401, { method: 'GET', path: '/admin/projects' });
    await call('gateway', 'listProjects', 403, { method: 'GET', path: '/admin/projects', headers: keysReader.auth });
    const projectPath = `/admin/projects/${project.id}`;
    for (const [operationId, method, suffix, body] of [
      ['getProject', 'GET', '', undefined],
      ['listProjectKeys', 'GET', '/keys', undefined],
      ['updateProject', 'PATCH', '', { rate_limit_rpm: 1000 }],
      ['setProjectQuota', 'POST', '/quota', { credits_quota: 1000 }],
      ['disableProject', 'DELETE', '', undefined],
    ] as const) {
      await call('gateway', operationId, 200, { method, path: `${projectPath}${suffix}`, headers: admin, body });
      await call('gateway', operationId, 400, { method, path: `/admin/projects/bad-id${suffix}`, headers: admin, body });
      await call('gateway', operationId, 401, { method, path: `${projectPath}${suffix}`, body });
      await call('gateway', operationId, 403, { method, path: `${projectPath}${suffix}`, headers: keysReader.auth, body });
      await call('gateway', operationId, 404, { method, path: `/admin/projects/prj_missing${suffix}`, headers: admin, body });
      if (body) {
        await call('gateway', operationId, 413, { method, path: `${projectPath}${suffix}`, headers: admin, body: { name: big } });
        await call('gateway', operationId, 415, { method, path: `${projectPath}${suffix}`, headers: { ...admin, 'Content-Type': 'text/plain' }, raw: 'x' });
      }
    }
    // A project with a moderation hook (never called here: no key of it generates), its secret rotated.
    const hooked = JSON.parse(
      (
        await call('gateway', 'createProject', 201, {
          method: 'POST',
          path: '/admin/projects',
          headers: admin,
          body: { ...projectBody, name: 'prism-hooked', moderation_hook: { url: 'https://moderation.example.com/hook', failure_mode: 'fail_open' } },
        })
      ).text,
    ) as { id: string };
    const rotatePath = (id: string) => `/admin/projects/${id}/moderation-hook/rotate-secret`;
    const rotation = { overlap_seconds: 60 };
    await call('gateway', 'rotateProjectModerationHookSecret', 200, { method: 'POST', path: rotatePath(hooked.id), headers: admin, body: rotation });
    await call('gateway', 'rotateProjectModerationHookSecret', 400, {
      method: 'POST',
      path: rotatePath(hooked.id),
      headers: admin,
      body: { overlap_seconds: -1 },
    });
    await call('gateway', 'rotateProjectModerationHookSecret', 401, { method: 'POST', path: rotatePath(hooked.id), body: rotation });
    await call('gateway', 'rotateProjectModerationHookSecret', 403, { method: 'POST', path: rotatePath(hooked.id), headers: keysReader.auth, body: rotation });
    // The first project has no hook.
    await call('gateway', 'rotateProjectModerationHookSecret', 404, { method: 'POST', path: rotatePath(project.id), headers: admin, body: rotation });
    await call('gateway', 'rotateProjectModerationHookSecret', 413, { method: 'POST', path: rotatePath(hooked.id), headers: admin, body: { name: big } });
    await call('gateway', 'rotateProjectModerationHookSecret', 415, {
      method: 'POST',
      path: rotatePath(hooked.id),
      headers: { ...admin, 'Content-Type': 'text/plain' },
      raw: 'x',
    });
    await call('gateway', 'rotateProjectModerationHookSecret', 200, {
      method: 'POST',
      path: rotatePath(hooked.id),
      headers: { ...admin, 'Idempotency-Key': 'rotate-1' },
      body: rotation,
    });
    await call('gateway', 'rotateProjectModerationHookSecret', 422, {
      method: 'POST',
      path: rotatePath(hooked.id),
      headers: { ...admin, 'Idempotency-Key': 'rotate-1' },
      body: { overlap_seconds: 120 },
    });

    // Admin tokens.
    await call('gateway', 'createAdminToken', 400, { method: 'POST', path: '/admin/tokens', headers: admin, body: { name: 'x', scopes: ['no:such'] } });
    await call('gateway', 'createAdminToken', 401, { method: 'POST', path: '/admin/tokens', body: { name: 'x', scopes: ['keys:read'] } });
    await call('gateway', 'createAdminToken', 403, {
      method: 'POST',
      path: '/admin/tokens',
      headers: keysReader.auth,
      body: { name: 'x', scopes: ['keys:read'] },
    });
    await call('gateway', 'createAdminToken', 413, { method: 'POST', path: '/admin/tokens', headers: admin, body: { name: big, scopes: ['keys:read'] } });

    // Console single sign-on, on a gateway without issuers (what needs an OpenID Provider is excused below).
    await call('gateway', 'listConsoleSsoIssuers', 200, { method: 'GET', path: '/console/sso/issuers' });
    await call('gateway', 'listConsoleSsoIssuers', 400, { method: 'GET', path: '/console/sso/issuers?nope=1' });
    await call('gateway', 'startConsoleSignIn', 404, { method: 'GET', path: '/console/sso/corp/sign-in' });
    await call('gateway', 'startConsoleSignIn', 400, { method: 'GET', path: '/console/sso/corp/sign-in?nope=1' });
    await call('gateway', 'completeConsoleSignIn', 404, { method: 'GET', path: '/console/sso/callback?state=s&code=c' });
    await call('gateway', 'signOutConsoleSession', 401, { method: 'POST', path: '/console/sso/sign-out' });
    await call('gateway', 'createAdminToken', 415, { method: 'POST', path: '/admin/tokens', headers: { ...admin, 'Content-Type': 'text/plain' }, raw: 'x' });
    await call('gateway', 'listAdminTokens', 200, { method: 'GET', path: '/admin/tokens?limit=1', headers: admin });
    await call('gateway', 'listAdminTokens', 400, { method: 'GET', path: '/admin/tokens?limit=0', headers: admin });
    await call('gateway', 'listAdminTokens', 401, { method: 'GET', path: '/admin/tokens' });
    await call('gateway', 'listAdminTokens', 403, { method: 'GET', path: '/admin/tokens', headers: keysReader.auth });
    for (const [operationId, method] of [
      ['getAdminToken', 'GET'],
      ['revokeAdminToken', 'DELETE'],
    ] as const) {
      await call('gateway', operationId, 200, { method, path: `/admin/tokens/${auditor.id}`, headers: admin });
      await call('gateway', operationId, 400, { method, path: '/admin/tokens/bad-id', headers: admin });
      await call('gateway', operationId, 401, { method, path: `/admin/tokens/${auditor.id}` });
      await call('gateway', operationId, 403, { method, path: `/admin/tokens/${auditor.id}`, headers: keysReader.auth });
      await call('gateway', operationId, 404, { method, path: '/admin/tokens/adt_missing', headers: admin });
    }

    // The audit log.
    await call('gateway', 'listAuditEvents', 200, { method: 'GET', path: `/admin/audit-events?target=${main.id}&limit=2`, headers: admin });
    await call('gateway', 'listAuditEvents', 400, { method: 'GET', path: '/admin/audit-events?action=DROP', headers: admin });
    await call('gateway', 'listAuditEvents', 401, { method: 'GET', path: '/admin/audit-events' });
    await call('gateway', 'listAuditEvents', 403, { method: 'GET', path: '/admin/audit-events', headers: keysReader.auth });

    // Usage analytics (JSON and CSV).
    const usageRange = 'from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z';
    await call('gateway', 'getUsageReport', 200, {
      method: 'GET',
      path: `/admin/usage?${usageRange}&bucket=day&group_by=owner,model&order=credits_desc`,
      headers: admin,
    });
    await call('gateway', 'getUsageReport', 200, { method: 'GET', path: `/admin/usage?${usageRange}&group_by=key`, headers: { ...admin, Accept: 'text/csv' } });
    await call('gateway', 'getUsageReport', 400, { method: 'GET', path: `/admin/usage?${usageRange}&group_by=colour`, headers: admin });
    await call('gateway', 'getUsageReport', 401, { method: 'GET', path: `/admin/usage?${usageRange}` });
    await call('gateway', 'getUsageReport', 403, { method: 'GET', path: `/admin/usage?${usageRange}`, headers: keysReader.auth });

    // Every key's generations (admin): a settled one (409 on cancel) and, against the local fake, a
    // slow asynchronous one canceled while it runs.
    const generationsReader = await createToken(['generations:read']);
    const genKey = await createKey({});
    const settled = JSON.parse(
      (
        await call('gateway', 'generateImage', 200, {
          method: 'POST',
          path: '/images/generate',
          headers: genKey.auth,
          body: { prompt: 'admin view', model: 'local-1', size: '32x32', response_format: 'url' },
        })
      ).text,
    ) as { id: string };
    await call('gateway', 'listAdminGenerations', 200, {
      method: 'GET',
      path: `/admin/generations?key_id=${genKey.id}&limit=1&created_after=2020-01-01T00:00:00Z`,
      headers: admin,
    });
    await call('gateway', 'listAdminGenerations', 400, { method: 'GET', path: '/admin/generations?limit=0', headers: admin });
    await call('gateway', 'listAdminGenerations', 401, { method: 'GET', path: '/admin/generations' });
    await call('gateway', 'listAdminGenerations', 403, { method: 'GET', path: '/admin/generations', headers: keysReader.auth });
    for (const [operationId, method, suffix, denied] of [
      ['getAdminGeneration', 'GET', '', keysReader],
      ['cancelAdminGeneration', 'POST', '/cancel', generationsReader],
    ] as const) {
      await call('gateway', operationId, 400, { method, path: `/admin/generations/bad-id${suffix}`, headers: admin });
      await call('gateway', operationId, 401, { method, path: `/admin/generations/${settled.id}${suffix}` });
      await call('gateway', operationId, 403, { method, path: `/admin/generations/${settled.id}${suffix}`, headers: denied.auth });
      await call('gateway', operationId, 404, { method, path: `/admin/generations/gen_missing${suffix}`, headers: admin });
    }
    await call('gateway', 'getAdminGeneration', 200, { method: 'GET', path: `/admin/generations/${settled.id}`, headers: admin });
    await call('gateway', 'cancelAdminGeneration', 409, { method: 'POST', path: `/admin/generations/${settled.id}/cancel`, headers: admin });
    if (target.local) {
      const slow = await call('gateway', 'generateImage', 202, {
        method: 'POST',
        path: '/images/generate',
        headers: { ...genKey.auth, Prefer: 'respond-async' },
        body: { prompt: 'cancel me [slow:3000]', model: 'jimeng-4.0' },
      });
      await call('gateway', 'cancelAdminGeneration', 200, {
        method: 'POST',
        path: `/admin/generations/${(JSON.parse(slow.text) as { id: string }).id}/cancel`,
        headers: admin,
      });
    }
    // A channel's live health (the environment's local channel is always there).
    const channelHealth = '/admin/channels/chn_envLocal/health';
    await call('gateway', 'getChannelHealth', 200, { method: 'GET', path: channelHealth, headers: admin });
    await call('gateway', 'getChannelHealth', 400, { method: 'GET', path: '/admin/channels/bad-id/health', headers: admin });
    await call('gateway', 'getChannelHealth', 401, { method: 'GET', path: channelHealth });
    await call('gateway', 'getChannelHealth', 403, { method: 'GET', path: channelHealth, headers: keysReader.auth });
    await call('gateway', 'getChannelHealth', 404, { method: 'GET', path: '/admin/channels/chn_missing/health', headers: admin });

    // Webhook endpoints. The endpoint is disabled before its test event, so nothing is sent to it
    // (no request leaves this machine).
    const hook = { url: 'https://hooks.example.com/prism', event_types: ['key.expiring'] };
    const createdHook = await call('gateway', 'createWebhookEndpoint', 201, { method: 'POST', path: '/admin/webhooks', headers: admin, body: hook });
    const hookPath = `/admin/webhooks/${(JSON.parse(createdHook.text) as { id: string }).id}`;
    await call('gateway', 'updateWebhookEndpoint', 200, {
      method: 'PATCH',
      path: hookPath,
      headers: admin,
      body: { status: 'disabled', description: 'prism' },
    });
    await call('gateway', 'createWebhookEndpoint', 400, {
      method: 'POST',
      path: '/admin/webhooks',
      headers: admin,
      body: { ...hook, url: 'ftp://example.com/x' },
    });
    await call('gateway', 'createWebhookEndpoint', 401, { method: 'POST', path: '/admin/webhooks', body: hook });
    await call('gateway', 'createWebhookEndpoint', 403, { method: 'POST', path: '/admin/webhooks', headers: keysReader.auth, body: hook });
    await call('gateway', 'createWebhookEndpoint', 413, { method: 'POST', path: '/admin/webhooks', headers: admin, body: { ...hook, description: big } });
    await call('gateway', 'createWebhookEndpoint', 415, {
      method: 'POST',
      path: '/admin/webhooks',
      headers: { ...admin, 'Content-Type': 'text/plain' },
      raw: 'x',
    });
    await call('gateway', 'listWebhookEndpoints', 200, { method: 'GET', path: '/admin/webhooks', headers: admin });
    await call('gateway', 'listWebhookEndpoints', 400, { method: 'GET', path: '/admin/webhooks?unknown=1', headers: admin });
    await call('gateway', 'listWebhookEndpoints', 401, { method: 'GET', path: '/admin/webhooks' });
    await call('gateway', 'listWebhookEndpoints', 403, { method: 'GET', path: '/admin/webhooks', headers: keysReader.auth });
    for (const [operationId, method, suffix, body, success] of [
      ['getWebhookEndpoint', 'GET', '', undefined, 200],
      ['updateWebhookEndpoint', 'PATCH', '', { description: 'prism again' }, 200],
      ['rotateWebhookSecret', 'POST', '/rotate-secret', { overlap_seconds: 60 }, 200],
      ['sendTestWebhook', 'POST', '/test', undefined, 202],
      ['listWebhookDeliveries', 'GET', '/deliveries?limit=1', undefined, 200],
      ['deleteWebhookEndpoint', 'DELETE', '', undefined, 204],
    ] as const) {
      const [route, query = ''] = `${hookPath}${suffix}`.split('?');
      const withQuery = (p: string) => (query ? `${p}?${query}` : p);
      await call('gateway', operationId, 400, { method, path: withQuery(`/admin/webhooks/bad-id${suffix.split('?')[0]}`), headers: admin, body });
      await call('gateway', operationId, 401, { method, path: withQuery(route!), body });
      await call('gateway', operationId, 403, { method, path: withQuery(route!), headers: keysReader.auth, body });
      await call('gateway', operationId, 404, { method, path: withQuery(`/admin/webhooks/whep_missing${suffix.split('?')[0]}`), headers: admin, body });
      if (body) {
        await call('gateway', operationId, 413, { method, path: route!, headers: admin, body: { description: big } });
        await call('gateway', operationId, 415, { method, path: route!, headers: { ...admin, 'Content-Type': 'text/plain' }, raw: 'x' });
      }
      await call('gateway', operationId, success, { method, path: withQuery(route!), headers: admin, body });
    }

    // OpenAI models: 403 for a key whose allowed_ips leave out this machine.
    // (`main` was rotated and disabled above.)
    const modelsKey = await createKey({});
    const elsewhere = await createKey({ allowed_ips: ['192.0.2.0/24'] });
    for (const [operationId, route] of [
      ['listModelsOpenAI', '/v1/models'],
      ['getModelOpenAI', '/v1/models/local-1'],
      ['getWebhookSigningSecret', '/v1/webhook-secret'],
    ] as const) {
      await call('gateway', operationId, 200, { method: 'GET', path: route, headers: modelsKey.auth });
      await call('gateway', operationId, 400, { method: 'GET', path: `${route}?unknown=1`, headers: modelsKey.auth });
      await call('gateway', operationId, 401, { method: 'GET', path: route });
      await call('gateway', operationId, 403, { method: 'GET', path: route, headers: elsewhere.auth });
    }
    await call('gateway', 'getModelOpenAI', 404, { method: 'GET', path: '/v1/models/no-such-model', headers: modelsKey.auth });

    for (const [operationId, route] of [
      ['getOpenApiDocument', '/openapi.json'],
      ['getApiReference', '/docs'],
      ['getLiveness', '/healthz'],
      ['getReadiness', '/readyz'],
    ] as const) {
      await call('gateway', operationId, 200, { method: 'GET', path: route });
      await call('gateway', operationId, 400, { method: 'GET', path: `${route}?unknown=1` });
    }
    // The console (built into dist/console by the tier's global setup) and the caller's own scopes.
    await call('gateway', 'getConsole', 200, { method: 'GET', path: '/console' });
    await call('gateway', 'getConsole', 400, { method: 'GET', path: '/console?unknown=1' });
    await call('gateway', 'getConsoleFile', 200, { method: 'GET', path: '/console/keys' });
    await call('gateway', 'getConsoleFile', 400, { method: 'GET', path: '/console/.env' });
    await call('gateway', 'getConsoleFile', 404, { method: 'GET', path: '/console/index-AAAAAAAA.js' });
    await call('gateway', 'getAdminIdentity', 200, { method: 'GET', path: '/admin/whoami', headers: keysReader.auth });
    await call('gateway', 'getAdminIdentity', 400, { method: 'GET', path: '/admin/whoami?unknown=1', headers: admin });
    await call('gateway', 'getAdminIdentity', 401, { method: 'GET', path: '/admin/whoami' });
    // 409 on createKey / createProject / a rotation needs two requests racing on one Idempotency-Key: not
    // scripted deterministically (test/keys/idempotent-hook-secrets.test.ts answers the rotation's);
    // getConsole's 404 answers only where the console was not built.
    expect(responseViolations).toEqual([]);
    if (target.local)
      expect(
        uncovered(
          target.documents.gateway,
          new Set([
            'createKey 409',
            'createProject 409',
            'rotateProjectModerationHookSecret 409',
            'getConsole 404',
            // A sign-in needs an OpenID Provider: test/console-sso runs these against oidc-provider.
            'startConsoleSignIn 302',
            'completeConsoleSignIn 303',
            'completeConsoleSignIn 400',
            'completeConsoleSignIn 403',
            'signOutConsoleSession 200',
            'signOutConsoleSession 400',
            'signOutConsoleSession 403',
          ]),
        ),
      ).toEqual([]);
    else console.log(`prism: not covered against this deployment: ${uncovered(target.documents.gateway, new Set()).join(', ')}`);
  }, 180_000);

  it('internal API: every operation, its success and each documented error status, 0 response violations', async () => {
    const token = target.serviceToken;
    const wrong = { 'CF-Access-Client-Id': token['CF-Access-Client-Id'] ?? '', 'CF-Access-Client-Secret': 'wrong-secret-0123456789' };
    const generations = '/api/v1/creative/images/generations';
    const generate = (expected: number, body: unknown, headers: Record<string, string> = token, raw?: string) =>
      call('creative', 'createGeneration', expected, { method: 'POST', path: generations, headers, body, raw });
    const created = await generate(200, { prompt: 'a boat', model: 'local-1', size: '32x32' });
    const id = (JSON.parse(created.text) as { id: string }).id;
    await generate(400, { model: 'local-1' });
    await generate(401, { prompt: 'p', model: 'local-1' }, {});
    await generate(403, { prompt: 'p', model: 'local-1' }, wrong);
    await generate(404, { prompt: 'p', model: 'no-such-model' });
    await generate(200, { prompt: 'a boat, again', model: 'local-1', size: '32x32', images: [dataUri(testPng(8, 8))] });
    await generate(413, { prompt: 'a bomb', model: 'local-1', images: [dataUri(claimedPng(9000, 9000))] });
    await generate(404, { prompt: 'p', model: 'local-1', images: ['img_notStoredAnywhere0'] });
    await generate(422, { prompt: 'p', model: 'local-1', images: ['https://10.0.0.1/a.png'] });
    await generate(415, undefined, { ...token, 'Content-Type': 'text/plain' }, 'x');
    if (target.local) {
      await generate(422, { prompt: 'withhold [post-code:50511]', model: 'jimeng-4.0' });
      await generate(502, { prompt: 'nonsense [garbage]', model: 'jimeng-4.0' });
      await generate(503, { prompt: 'no credentials', model: 'jimeng-4.5' });
      await generate(504, { prompt: 'too slow [slow:3000]', model: 'jimeng-4.0' });
    }
    const reads: Array<[string, string, string]> = [
      ['listModels', '/api/v1/creative/models', '?unknown=1'],
      ['listProviders', '/api/v1/creative/providers', '?unknown=1'],
      ['listGenerations', '/api/v1/creative/generations?limit=1&created_after=2020-01-01T00:00:00Z', '?limit=0x10'],
      ['getGeneration', `/api/v1/creative/generations/${id}`, '/api/v1/creative/generations/bad-id'],
      ['getUsage', '/api/v1/creative/usage?from=2020-01-01T00:00:00Z&to=2030-06-30T23:59:60Z', '?from=2030-02-30T00:00:00Z&to=2030-03-01T00:00:00Z'],
      ['getCreativeOpenApiDocument', '/api/v1/creative/openapi.json', '?unknown=1'],
      ['getCreativeApiReference', '/docs', '?unknown=1'],
      ['listChannelHealth', '/api/v1/creative/channels/health', '?unknown=1'],
    ];
    for (const [operationId, route, bad] of reads) {
      const base = route.split('?')[0]!;
      await call('creative', operationId, 200, { method: 'GET', path: route, headers: token });
      await call('creative', operationId, 400, { method: 'GET', path: bad.startsWith('/') ? bad : `${base}${bad}`, headers: token });
      await call('creative', operationId, 401, { method: 'GET', path: route });
      await call('creative', operationId, 403, { method: 'GET', path: route, headers: wrong });
    }
    await call('creative', 'getGeneration', 404, { method: 'GET', path: '/api/v1/creative/generations/gen_missing', headers: token });
    for (const [operationId, route] of [
      ['getInternalLiveness', '/healthz'],
      ['getInternalReadiness', '/readyz'],
      ['getMetrics', '/metrics'],
    ] as const) {
      await call('creative', operationId, 200, { method: 'GET', path: route });
      await call('creative', operationId, 400, { method: 'GET', path: `${route}?unknown=1` });
    }
    expect(responseViolations).toEqual([]);
    if (target.local) expect(uncovered(target.documents.creative, new Set())).toEqual([]);
    else console.log(`prism: not covered against this deployment: ${uncovered(target.documents.creative, new Set()).join(', ')}`);
    console.log(
      `prism: ${sent} requests through Prism, ${responseViolations.length} response violations, ${requestViolations} request violations (bad requests sent on purpose)`,
    );
  }, 180_000);

  /** Documented (operation, status) pairs the script did not produce, less the unprovokable ones. */
  const notYetScripted: string[] = [];
  afterAll(() => console.log(`prism: not scripted yet (issue #12 follow-up): ${notYetScripted.join(', ')}`));

  function uncovered(document: Json, alsoSkipped: Set<string>): string[] {
    const missing: string[] = [];
    for (const item of Object.values(document.paths as Record<string, Record<string, { operationId?: string; responses?: Record<string, unknown> }>>)) {
      for (const operation of Object.values(item)) {
        if (!operation?.operationId) continue;
        for (const status of Object.keys(operation.responses ?? {})) {
          const pair = `${operation.operationId} ${status}`;
          if (covered.has(pair) || UNPROVOKABLE.has(status) || UNPROVOKABLE.has(pair) || alsoSkipped.has(pair)) continue;
          if (NOT_YET_SCRIPTED_OPERATIONS.has(operation.operationId) || NOT_YET_SCRIPTED_STATUSES.has(status) || NOT_YET_SCRIPTED_PAIRS.has(pair)) {
            notYetScripted.push(pair);
            continue;
          }
          missing.push(pair);
        }
      }
    }
    return missing;
  }
});
