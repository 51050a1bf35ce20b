import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { ADMIN_SECRET, type TestGateway, startTestGateway } from '../helpers/test-gateway';

const root = path.resolve(__dirname, '../..');

/**
 * What a client team does (the recipe in docs/clients/sdk.md): generate types from our spec, write a program,
 * type-check it, run it. `--default-non-nullable false` keeps fields with defaults optional.
 */
const PROGRAM = `
import createClient from 'openapi-fetch';
import type { paths } from './gateway-schema';

const client = createClient<paths>({ baseUrl: process.env.GATEWAY_URL });

async function main(): Promise<void> {
  const created = await client.POST('/admin/keys', {
    headers: { Authorization: \`Bearer \${process.env.ADMIN_SECRET}\` },
    body: { name: 'sdk', owner: 'sdk@example.com', credits_quota: 5, quota_period_days: 30, allowed_providers: ['local'] },
  });
  if (!created.data) throw new Error(JSON.stringify(created.error));
  const generated = await client.POST('/images/generate', {
    headers: { Authorization: \`Bearer \${created.data.key}\` },
    body: { prompt: 'made by a generated client', model: 'local-1', size: '32x32', response_format: 'b64_json' },
  });
  if (!generated.data) throw new Error(JSON.stringify(generated.error));
  // Without Prefer: respond-async the answer is the finished generation (200), not the 202 resource.
  if (!('created' in generated.data)) throw new Error(\`still \${generated.data.status}\`);
  const remaining: number = generated.data.usage.credits_remaining;
  const refused = await client.POST('/images/generate', { body: { prompt: 'no key', model: 'local-1' } });
  const code: string | undefined = refused.error?.error.code;
  console.log(JSON.stringify({ key_id: created.data.id, remaining, images: generated.data.data.length, refused: code }));
}

void main();
`;

describe('SDK generated from openapi/gateway.yaml (openapi-typescript + openapi-fetch)', () => {
  let t: TestGateway;
  let dir: string;
  beforeAll(async () => {
    t = await startTestGateway();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-sdk-'));
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
    execFileSync(
      process.execPath,
      [
        path.join(root, 'node_modules/openapi-typescript/bin/cli.js'),
        path.join(root, 'openapi/gateway.yaml'),
        '--default-non-nullable',
        'false',
        '-o',
        path.join(dir, 'gateway-schema.ts'),
      ],
      {
        stdio: 'pipe',
      },
    );
  });
  afterAll(async () => {
    await t.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const typeErrors = (source: string): string[] => {
    fs.writeFileSync(path.join(dir, 'client.ts'), source);
    const program = ts.createProgram([path.join(dir, 'client.ts')], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      types: ['node'],
      typeRoots: [path.join(root, 'node_modules/@types')],
      skipLibCheck: true,
    });
    return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  };

  it('type-checks a program against the generated client, and rejects one that breaks the contract', () => {
    const errors = typeErrors(PROGRAM);
    if (errors.length > 0) console.log(errors.join('\n'));
    expect(errors).toEqual([]);
    const broken = PROGRAM.replace("prompt: 'made by a generated client', model: 'local-1',", "prompt: 'no model',").replace(
      'const remaining: number = generated.data.usage.credits_remaining;',
      'const remaining: string = generated.data.usage.credits_remaining;',
    );
    const brokenErrors = typeErrors(broken).join('\n');
    expect(brokenErrors).toMatch(/model/);
    expect(brokenErrors).toMatch(/not assignable to type 'string'/);
  });

  it('runs the program against a live gateway: create a key, generate', async () => {
    fs.writeFileSync(path.join(dir, 'gateway-schema.mjs'), 'export {};\n');
    const { outputText } = ts.transpileModule(PROGRAM.replace("from './gateway-schema'", "from './gateway-schema.mjs'"), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    fs.writeFileSync(path.join(dir, 'client.mjs'), outputText);
    // Asynchronously: the gateway answering it runs in this process.
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(dir, 'client.mjs')], {
      env: { ...process.env, GATEWAY_URL: t.gateway.url, ADMIN_SECRET },
      timeout: 20_000,
    });
    expect(JSON.parse(stdout)).toMatchObject({ key_id: expect.stringMatching(/^key_/), remaining: 4, images: 1, refused: 'missing_api_key' });
  });
});
