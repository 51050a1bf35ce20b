import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');

/**
 * `npm install` piped (CI, `| tee`) shows no progress of its own: the project's scripts say where
 * the install is and what each build step does before it starts.
 */
describe('install progress', () => {
  it("postinstall's link step prints a line saying the dependencies are in and the build comes next", () => {
    const run = spawnSync(process.execPath, [path.join(root, 'scripts/link-bin.js')], { cwd: root, encoding: 'utf8' });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^creative-gateway: dependencies installed.*next, the build/m);
  });

  it('the build (prepare) is scripts/build.js, which names each step it runs: tsc, the stamp, the console', () => {
    const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(manifest.scripts.build).toBe('node scripts/build.js');
    expect(manifest.scripts.prepare).toBe('npm run -s build');
    const { STEPS } = require(path.join(root, 'scripts/build.js')) as { STEPS: Array<[string, string[]]> };
    expect(STEPS.map(([what, args]) => [what.length > 0, path.basename(args[0] ?? '')])).toEqual([
      [true, 'tsc'],
      [true, 'dist-stamp.js'],
      [true, 'build-console.js'],
    ]);
  });
});
