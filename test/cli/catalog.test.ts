import { spawn } from 'node:child_process';
import { BIN } from './cli-harness';

/** `creative-gateway catalog`: the effective model catalog of this environment, as MODEL_CATALOG JSON (no gateway needed). */
async function catalog(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, 'catalog'], { env: { PATH: process.env.PATH, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end();
  const code = await new Promise<number>((resolve) => child.on('close', (exit) => resolve(exit ?? -1)));
  return { code, stdout, stderr };
}

describe('creative-gateway catalog', () => {
  it('prints the built-in catalog without MODEL_CATALOG, in the form MODEL_CATALOG takes back', async () => {
    const result = await catalog({});
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const printed = JSON.parse(result.stdout) as Array<{ model: string }>;
    expect(printed.map((entry) => entry.model)).toEqual(expect.arrayContaining(['local-1', 'jimeng-4.5', 'jimeng-4.0']));
    // What it printed, given back as MODEL_CATALOG, is the same catalog.
    const again = await catalog({ MODEL_CATALOG: result.stdout });
    expect(JSON.parse(again.stdout)).toEqual(printed);
  });

  it('prints the additive form merged over the built-in catalog', async () => {
    const result = await catalog({
      MODEL_CATALOG: JSON.stringify({
        models: [{ model: 'cheap', provider: 'local', upstream_model: 'local-1', credits_per_image: 0 }],
        remove: ['jimeng-3.1'],
      }),
    });
    expect(result.code).toBe(0);
    const models = (JSON.parse(result.stdout) as Array<{ model: string }>).map((entry) => entry.model);
    expect(models).toContain('local-1');
    expect(models).toContain('cheap');
    expect(models).not.toContain('jimeng-3.1');
  });

  it('a wrong catalog: the reason on stderr, nothing on stdout, exit 2', async () => {
    const result = await catalog({ MODEL_CATALOG: '{"remove":["nope"]}' });
    expect(result).toMatchObject({ code: 2, stdout: '' });
    expect(result.stderr).toMatch(/MODEL_CATALOG is invalid: "remove" names nope/);
  });
});
