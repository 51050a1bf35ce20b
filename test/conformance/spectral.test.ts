import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { type ConformanceTarget, conformanceTarget } from './target';

const root = path.resolve(__dirname, '../..');
const SPECTRAL = path.join(root, 'node_modules/@stoplight/spectral-cli/dist/index.js');

interface SpectralResult {
  code: string;
  message: string;
  source?: string;
  range: { start: { line: number } };
}

/** Spectral with every spectral:oas rule (.spectral.yaml): no result of any severity. */
async function lint(files: string[]): Promise<SpectralResult[]> {
  const run = promisify(execFile)(
    process.execPath,
    [SPECTRAL, 'lint', ...files, '--ruleset', path.join(root, '.spectral.yaml'), '--format', 'json', '--fail-severity', 'hint', '--quiet'],
    {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const { stdout } = await run.catch((error: { stdout?: string; stderr?: string }) => {
    if (!error.stdout) throw new Error(`spectral failed: ${error.stderr}`);
    return { stdout: error.stdout };
  });
  return JSON.parse(stdout.trim() || '[]') as SpectralResult[];
}

const show = (results: SpectralResult[]) => results.map((r) => `${path.basename(r.source ?? '')}:${r.range.start.line + 1} ${r.code}: ${r.message}`);

describe('conformance: Spectral (spectral:oas, all rules)', () => {
  let target: ConformanceTarget;
  beforeAll(async () => {
    target = await conformanceTarget();
  }, 60_000);
  afterAll(() => target?.close());

  it('finds nothing in the YAML sources and in both served documents, and does report a planted defect', async () => {
    // One Spectral run (it starts slowly): the real documents plus a copy with an unused component planted.
    const planted = path.join(target.files.dir, 'planted.json');
    const document = structuredClone(target.documents.gateway) as { components: { schemas: Record<string, unknown> } };
    document.components.schemas.Unused = { type: 'string' };
    fs.writeFileSync(planted, JSON.stringify(document));
    const results = await lint([
      path.join(root, 'openapi/gateway.yaml'),
      path.join(root, 'openapi/creative.yaml'),
      target.files.gateway,
      target.files.creative,
      planted,
    ]);
    expect(show(results.filter((r) => r.source !== planted))).toEqual([]);
    expect(results.filter((r) => r.source === planted).map((r) => r.code)).toEqual(['oas3-unused-component']);
  }, 120_000);
});
