import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { GatewayProcess } from '../helpers/gateway-process';
import { PastingShell, startFreshCloneGateway } from '../helpers/pasting-shell';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The runnable examples of the docs, as a reader pastes them. A fenced block's info string says what
 * it is: ```` ```sh run ```` is pasted into one shell per page (in order: variables carry over) against
 * a gateway started as a newcomer starts it, and must exit 0 with every curl call answered 2xx;
 * ```` ```ts check ```` is type-checked with the tsconfig docs/clients/sdk.md gives. Other blocks are
 * illustrations (placeholders, remote hosts) and are not run. The README's walk-through has its own
 * test (readme-walkthrough.test.ts); its TypeScript is checked here.
 */
interface Block {
  page: string;
  index: number;
  kind: 'run' | 'check';
  text: string;
}

function markdownPages(): string[] {
  const walk = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) return walk(file);
      return entry.name.endsWith('.md') ? [path.relative(ROOT, file)] : [];
    });
  return ['README.md', ...walk(path.join(ROOT, 'docs'))];
}

function blocksOf(page: string): Block[] {
  const text = fs.readFileSync(path.join(ROOT, page), 'utf8');
  return [...text.matchAll(/^```(sh|bash|ts) (run|check)\n([\s\S]*?)^```$/gm)].map((match, index) => {
    const [, language, kind, body] = match as unknown as [string, string, 'run' | 'check', string];
    if ((language === 'ts') !== (kind === 'check')) throw new Error(`${page}: a ${language} block is marked "${kind}" (sh/bash blocks run, ts blocks check)`);
    return { page, index, kind, text: body };
  });
}

/** The tsconfig.json docs/clients/sdk.md gives for its example: the one every `ts check` block is checked with. */
function documentedTsconfig(): string {
  const sdk = fs.readFileSync(path.join(ROOT, 'docs/clients/sdk.md'), 'utf8');
  const json = /`tsconfig\.json` beside it[\s\S]*?^```json\n([\s\S]*?)^```$/m.exec(sdk)?.[1];
  if (json === undefined) throw new Error('docs/clients/sdk.md gives no tsconfig.json');
  return json;
}

const blocks = markdownPages().flatMap(blocksOf);
const shellPages = [...new Set(blocks.filter((b) => b.kind === 'run').map((b) => b.page))];

describe("the docs' runnable examples", () => {
  let directory: string;
  let tools: string;
  let codesFile: string;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    ({ directory, tools, codesFile, gateway } = await startFreshCloneGateway('cgw-docs'));
  }, 60_000);

  afterAll(async () => {
    await gateway?.stop();
    for (const made of [directory, tools]) if (made) fs.rmSync(made, { recursive: true, force: true });
  });

  it('has runnable blocks on the pages that promise them, each marked for what it is', () => {
    expect(shellPages).toEqual(expect.arrayContaining(['docs/clients/internal-api.md', 'docs/operators/projects.md', 'docs/clients/sdk.md']));
    expect(blocks.filter((b) => b.kind === 'check').map((b) => b.page)).toEqual(
      expect.arrayContaining([
        'README.md',
        'docs/clients/sdk.md',
        'docs/clients/webhooks.md',
        'docs/clients/image-inputs.md',
        'docs/clients/openai-compatibility.md',
      ]),
    );
  });

  describe.each(shellPages)('%s, pasted in order', (page) => {
    let shell: PastingShell;
    beforeAll(() => {
      shell = new PastingShell(directory, {
        // The project's Node 24 and tools (npx openapi-typescript) as npm install leaves them; then the recording curl.
        PATH: [path.join(ROOT, 'node_modules/.bin'), tools, process.env.PATH].join(':'),
        HOME: directory,
        CURL_CODES: codesFile,
      });
    });
    afterAll(() => shell?.close());

    it.each(blocks.filter((b) => b.kind === 'run' && b.page === page).map((b) => [b.index + 1, b] as const))(
      'block %i exits 0 and every curl call in it is answered 2xx',
      async (_number, block) => {
        const pasted = block.text.replaceAll('localhost:8080', new URL(gateway.url).host).replaceAll('localhost:8081', new URL(gateway.internalUrl).host);
        expect(pasted).not.toMatch(/localhost/);
        const file = path.join(tools, `${path.basename(page, '.md')}-${block.index + 1}.sh`);
        fs.writeFileSync(file, pasted);
        fs.writeFileSync(codesFile, '');
        const { status, output } = await shell.paste(file);
        const codes = fs.readFileSync(codesFile, 'utf8').split('\n').filter(Boolean).map(Number);
        expect({ status, refused: codes.filter((code) => code < 200 || code > 299), output }).toEqual({ status: 0, refused: [], output: expect.any(String) });
      },
      60_000,
    );
  });

  // After the shell blocks: the SDK's example imports the schema its block generated.
  it('every ts check block type-checks with the documented tsconfig', () => {
    const checked = path.join(directory, 'ts-check');
    fs.mkdirSync(checked);
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(checked, 'node_modules'));
    fs.writeFileSync(path.join(checked, 'tsconfig.json'), documentedTsconfig());
    const schema = path.join(directory, 'gateway-schema.ts');
    expect(fs.existsSync(schema)).toBe(true);
    fs.copyFileSync(schema, path.join(checked, 'gateway-schema.ts'));
    const files: string[] = [];
    for (const block of blocks.filter((b) => b.kind === 'check')) {
      const name = `${block.page.replace(/[/.]/g, '_')}-${block.index + 1}.ts`;
      files.push(name);
      fs.writeFileSync(path.join(checked, name), block.text);
    }
    const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', '.'], { cwd: checked, encoding: 'utf8' });
    expect({ status: tsc.status, errors: tsc.stdout + tsc.stderr }).toEqual({ status: 0, errors: '' });
    expect(files.length).toBeGreaterThanOrEqual(5);
  }, 120_000);
});
