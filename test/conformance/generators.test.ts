import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import ts from 'typescript';
import { closeClient, exchange } from './http-client';
import { type ConformanceTarget, conformanceTarget } from './target';

const root = path.resolve(__dirname, '../..');
const run = promisify(execFile);

/**
 * What client teams do with third-party generators (openapi-typescript with openapi-fetch is also
 * run live in test/contract/sdk.test.ts): generate a client from the served JSON, compile all of it
 * and a program against it with `tsc --strict`, and run it live: create a key, generate with
 * `local-1`, page through keys, read a typed error, call the internal API.
 */

/** Every .ts file under `dir` (a generator's output), outside `node_modules` and `out`. */
function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !/(^|\/)(node_modules|out)\//.test(file))
    .map((file) => path.join(dir, file));
}

/** Type-checks (strict) every generated file and the entry, and emits CommonJS; returns the diagnostics. */
function compile(dir: string, entry: string): string[] {
  const program = ts.createProgram([...new Set([path.join(dir, entry), ...sources(dir)])], {
    strict: true,
    noUncheckedIndexedAccess: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
    types: ['node'],
    typeRoots: [path.join(root, 'node_modules/@types')],
    skipLibCheck: true,
    outDir: path.join(dir, 'out'),
  });
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
  return diagnostics.map((d) => `${d.file ? path.relative(dir, d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

const HEY_API_PROGRAM = `
import { createClient } from './gateway/client';
import * as gateway from './gateway';
import type { ErrorCode } from './gateway';
import { createClient as createInternalClient } from './creative/client';
import * as creative from './creative';

async function main(): Promise<void> {
  const client = createClient({ baseUrl: process.env.GATEWAY_URL as string });
  const admin = { Authorization: \`Bearer \${process.env.ADMIN_SECRET}\` };
  const created = await gateway.createKey({
    client,
    headers: admin,
    body: { name: 'hey-api', owner: 'hey-api@example.com', credits_quota: 5, quota_period_days: 30, allowed_providers: ['local'] },
  });
  if (!created.data) throw new Error(JSON.stringify(created.error));
  const generated = await gateway.generateImage({
    client,
    headers: { Authorization: \`Bearer \${created.data.key}\` },
    body: { prompt: 'made by hey-api', model: 'local-1', size: '32x32', response_format: 'b64_json' },
  });
  if (!generated.data) throw new Error(JSON.stringify(generated.error));
  // 200 and 202 (Prefer: respond-async) share \`data\`: without Prefer the answer is the finished generation.
  if (!('created' in generated.data)) throw new Error(\`still \${generated.data.status}\`);
  const remaining: number = generated.data.usage.credits_remaining;
  let cursor: string | undefined;
  let pages = 0;
  let keys = 0;
  do {
    const page = await gateway.listKeys({ client, headers: admin, query: { limit: 1, owner: 'hey-api@example.com', cursor } });
    if (!page.data) throw new Error(JSON.stringify(page.error));
    keys += page.data.data.length;
    cursor = page.data.next_cursor ?? undefined;
    pages += 1;
  } while (cursor !== undefined && pages < 20);
  const refused = await gateway.generateImage({ client, body: { prompt: 'no key', model: 'local-1' } });
  const code: ErrorCode | undefined = refused.error?.error.code;
  const requestId = refused.response?.headers.get('X-Request-Id');
  const internal = createInternalClient({ baseUrl: process.env.INTERNAL_URL as string });
  const models = await creative.listModels({
    client: internal,
    headers: { 'CF-Access-Client-Id': process.env.SERVICE_ID as string, 'CF-Access-Client-Secret': process.env.SERVICE_SECRET as string },
  });
  if (!models.data) throw new Error(JSON.stringify(models.error));
  console.log(JSON.stringify({ remaining, pages, keys, refused: code, sameRequestId: requestId === refused.error?.error.request_id, models: models.data.data.map((m) => m.model) }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
`;

const ORVAL_PROGRAM = `
import { createKey, generateImage, listKeys, type ErrorCode } from './gateway';
import { listModels } from './creative';

async function main(): Promise<void> {
  const admin = { headers: { Authorization: \`Bearer \${process.env.ADMIN_SECRET}\` } };
  const created = await createKey({ name: 'orval', owner: 'orval@example.com', credits_quota: 5, quota_period_days: 30, allowed_providers: ['local'] }, admin);
  if (created.status !== 201) throw new Error(JSON.stringify(created.data));
  const generated = await generateImage(
    { prompt: 'made by orval', model: 'local-1', size: '32x32', response_format: 'b64_json' },
    { headers: { Authorization: \`Bearer \${created.data.key}\` } },
  );
  if (generated.status !== 200) throw new Error(JSON.stringify(generated.data));
  const remaining: number = generated.data.usage.credits_remaining;
  let cursor: string | undefined;
  let pages = 0;
  let keys = 0;
  do {
    const page = await listKeys({ limit: 1, owner: 'orval@example.com', ...(cursor === undefined ? {} : { cursor }) }, admin);
    if (page.status !== 200) throw new Error(JSON.stringify(page.data));
    keys += page.data.data.length;
    cursor = page.data.next_cursor ?? undefined;
    pages += 1;
  } while (cursor !== undefined && pages < 20);
  const refused = await generateImage({ prompt: 'no key', model: 'local-1' });
  let code: ErrorCode | undefined;
  let sameRequestId = false;
  if (refused.status === 401) {
    code = refused.data.error.code;
    sameRequestId = refused.headers.get('X-Request-Id') === refused.data.error.request_id;
  }
  const models = await listModels({ headers: { 'CF-Access-Client-Id': process.env.SERVICE_ID as string, 'CF-Access-Client-Secret': process.env.SERVICE_SECRET as string } });
  if (models.status !== 200) throw new Error(JSON.stringify(models.data));
  console.log(JSON.stringify({ remaining, pages, keys, refused: code, sameRequestId, models: models.data.data.map((m) => m.model) }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
`;

describe('conformance: third-party generators compile (tsc --strict) and run live', () => {
  let target: ConformanceTarget;
  beforeAll(async () => {
    target = await conformanceTarget();
  }, 60_000);
  afterAll(async () => {
    closeClient();
    await target?.close();
  });

  const env = () => ({
    ...process.env,
    GATEWAY_URL: target.gatewayUrl,
    INTERNAL_URL: target.internalUrl,
    ADMIN_SECRET: target.adminSecret,
    SERVICE_ID: target.serviceToken['CF-Access-Client-Id'],
    SERVICE_SECRET: target.serviceToken['CF-Access-Client-Secret'],
  });
  const expected = (owner: string) => ({
    remaining: 4,
    pages: 2,
    keys: 2,
    refused: 'missing_api_key',
    sameRequestId: true,
    models: expect.arrayContaining(['local-1']),
    owner,
  });

  /** A generator that warns (about the spec, a reference, a validation) says something about our contract. */
  function expectNoWarnings(generator: string, stdout: string, stderr: string): void {
    const warnings = `${stdout}\n${stderr}`.split('\n').filter((line) => /warn|⚠|validation failed|invalid/i.test(line));
    expect({ generator, warnings, stderr }).toEqual({ generator, warnings: [], stderr: '' });
  }

  async function runProgram(dir: string, source: string, owner: string): Promise<void> {
    fs.writeFileSync(path.join(dir, 'program.ts'), source);
    const errors = compile(dir, 'program.ts');
    expect(errors).toEqual([]);
    // A second key of the same owner, so paging with limit=1 takes two pages.
    const res = await exchange(target.gatewayUrl, {
      method: 'POST',
      path: '/admin/keys',
      headers: { Authorization: `Bearer ${target.adminSecret}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'second', owner, credits_quota: 1, quota_period_days: 1, allowed_providers: ['local'] }),
    });
    expect(res.status).toBe(201);
    const { stdout } = await run(process.execPath, [path.join(dir, 'out', 'program.js')], { env: env(), timeout: 30_000 });
    expect({ ...(JSON.parse(stdout) as object), owner }).toEqual(expected(owner));
  }

  // The validator orval 7 and other generators run before generating: what it refuses, they warn
  // about (orval 7: "Swagger schema validation failed") or stop on.
  it('@apidevtools/swagger-parser accepts both served documents', async () => {
    for (const api of ['gateway', 'creative'] as const) {
      const problems = await SwaggerParser.validate(target.files[api]).then(
        () => '',
        (error: unknown) => String(error),
      );
      expect({ api, problems }).toEqual({ api, problems: '' });
    }
  });

  // Generators name a type after the component a reference names; one into another schema's
  // `properties` (`#/components/schemas/X/properties/id`) became an undeclared type `Id` in orval 7.
  it('every $ref names a whole component', () => {
    for (const api of ['gateway', 'creative'] as const) {
      const refs = new Set<string>();
      const visit = (node: unknown): void => {
        if (Array.isArray(node)) node.forEach(visit);
        else if (node !== null && typeof node === 'object') {
          for (const [key, value] of Object.entries(node)) {
            if (key === '$ref' && typeof value === 'string') refs.add(value);
            else visit(value);
          }
        }
      };
      visit(target.documents[api]);
      expect(refs.size).toBeGreaterThan(0);
      expect({ api, refs: [...refs].filter((ref) => !/^#\/components\/[A-Za-z]+\/[^/]+$/.test(ref)) }).toEqual({ api, refs: [] });
    }
  });

  it('openapi-typescript (types for openapi-fetch): no warning, compiles', async () => {
    const dir = path.join(target.files.dir, 'openapi-typescript');
    for (const api of ['gateway', 'creative'] as const) {
      const { stdout, stderr } = await run(
        process.execPath,
        [
          path.join(root, 'node_modules/openapi-typescript/bin/cli.js'),
          target.files[api],
          '--default-non-nullable',
          'false',
          '-o',
          path.join(dir, `${api}.ts`),
        ],
        { cwd: target.files.dir, timeout: 60_000 },
      );
      expectNoWarnings(`openapi-typescript ${api}`, stdout, stderr);
    }
    fs.writeFileSync(
      path.join(dir, 'program.ts'),
      `import type { components } from './gateway';
import type { paths } from './creative';
type AdminGeneration = components['schemas']['AdminGeneration'];
type Usage = paths['/api/v1/creative/usage']['get']['responses'][200]['content']['application/json'];
export const ids = (generations: AdminGeneration[], usage: Usage): string[] => [...generations.map((g) => g.id + ':' + String(g.usage.credits_charged)), String(usage)];
`,
    );
    expect(compile(dir, 'program.ts')).toEqual([]);
  }, 120_000);

  it('@hey-api/openapi-ts (fetch client)', async () => {
    const dir = path.join(target.files.dir, 'hey-api');
    for (const api of ['gateway', 'creative'] as const) {
      const { stdout, stderr } = await run(
        process.execPath,
        [path.join(root, 'node_modules/@hey-api/openapi-ts/bin/run.js'), '-i', target.files[api], '-o', path.join(dir, api), '-c', '@hey-api/client-fetch'],
        {
          cwd: target.files.dir,
          timeout: 60_000,
        },
      );
      expectNoWarnings(api, stdout, stderr);
    }
    await runProgram(dir, HEY_API_PROGRAM, 'hey-api@example.com');
  }, 120_000);

  it("orval (fetch client, base URL from the spec's servers)", async () => {
    const dir = path.join(target.files.dir, 'orval');
    fs.mkdirSync(dir, { recursive: true });
    // The server variable `authority` is the only thing a client team sets: the spec gives the rest.
    const output = (api: 'gateway' | 'creative', url: string) => ({
      input: { target: target.files[api] },
      output: {
        target: path.join(dir, `${api}.ts`),
        client: 'fetch',
        baseUrl: { getBaseUrlFromSpecification: true, variables: { authority: new URL(url).host } },
      },
    });
    const config = { gateway: output('gateway', target.gatewayUrl), creative: output('creative', target.internalUrl) };
    fs.writeFileSync(path.join(dir, 'orval.config.cjs'), `module.exports = ${JSON.stringify(config)};\n`);
    // --fail-on-warnings: a warning (about the spec, say) fails the run instead of scrolling by.
    const { stdout, stderr } = await run(
      process.execPath,
      [path.join(root, 'node_modules/orval/dist/bin/orval.mjs'), '--config', path.join(dir, 'orval.config.cjs'), '--fail-on-warnings'],
      {
        cwd: dir,
        timeout: 60_000,
      },
    );
    expectNoWarnings('orval', stdout, stderr);
    await runProgram(dir, ORVAL_PROGRAM, 'orval@example.com');
  }, 120_000);
});
