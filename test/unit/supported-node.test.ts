import { readFileSync } from 'node:fs';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { unsupportedNode, MINIMUM } = require('../../scripts/supported-node.js') as {
  unsupportedNode: (version: string) => string | undefined;
  MINIMUM: { major: number; minor: number };
};

describe('supported Node.js lines', () => {
  it.each(['v22.12.0', 'v22.23.3', 'v24.0.0', 'v24.21.0', 'v26.1.0'])('%s is supported', (version) => {
    expect(unsupportedNode(version)).toBeUndefined();
  });

  it.each(['v18.20.0', 'v20.20.2', 'v22.11.0'])('%s is refused in one line naming the supported lines', (version) => {
    const refusal = unsupportedNode(version);
    expect(refusal).toContain(version);
    expect(refusal).toContain('Node 22');
    expect(refusal).toContain('Node 24');
    expect(refusal).not.toContain('\n');
  });

  it("package.json's engines says the same as the start check", () => {
    const pkg = JSON.parse(readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe(`^${MINIMUM.major}.${MINIMUM.minor}.0 || >=24.0.0`);
  });

  it('this suite runs on a supported line', () => {
    expect(unsupportedNode(process.version)).toBeUndefined();
  });
});
