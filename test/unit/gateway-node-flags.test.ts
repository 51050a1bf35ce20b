import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const flagsOf = (command: string) => command.split(/\s+/).filter((word) => word.startsWith('--'));

/**
 * The node flags the gateway runs with live in package.json's start script (the bench reads them from
 * there too); the service unit that docs/operators/production.md gives operators must pass the same ones.
 */
describe("the gateway's node flags", () => {
  const start = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;

  it('npm start caps the young generation (--max-semi-space-size)', () => {
    expect(flagsOf(start)).toContain('--max-semi-space-size=8');
  });

  it("production.md's ExecStart passes exactly npm start's flags", () => {
    const unit = readFileSync(path.join(root, 'docs/operators/production.md'), 'utf8');
    const execStart = /^ExecStart=(.*)$/m.exec(unit)?.[1];
    expect(execStart).toBeDefined();
    expect(flagsOf(execStart!)).toEqual(flagsOf(start));
  });
});
