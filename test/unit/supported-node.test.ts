import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { unsupportedNode, commandThatWorks, MINIMUM } = require('../../scripts/supported-node.js') as {
  unsupportedNode: (version: string, command?: string) => string | undefined;
  commandThatWorks: (argv: string[], cwd: string, shippedNode?: string) => string | undefined;
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

  it('the refusal names the command that runs the same on the shipped Node 24, as typed from the working directory', () => {
    const root = path.resolve(__dirname, '../..');
    const shipped = path.join(root, 'node_modules/.bin/node');
    const argv = ['/usr/bin/node', 'bin/creative-gateway.js', 'keys', 'create', '--name', "Ann's key"];
    const command = commandThatWorks(argv, root, shipped);
    expect(command).toBe(`node_modules/.bin/node bin/creative-gateway.js keys create --name 'Ann'\\''s key'`);
    expect(unsupportedNode('v20.20.2', command)).toContain(`node_modules/.bin: ${command}`);
    // From elsewhere (a folder that holds no part of the checkout, wherever that is), absolute paths; without the shipped Node, how to get one.
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-elsewhere-'));
    expect(
      commandThatWorks(
        argv.map((arg, i) => (i === 1 ? path.join(root, arg) : arg)),
        elsewhere,
        shipped,
      ),
    ).toMatch(new RegExp(`^${shipped} ${root}/bin/creative-gateway.js keys`));
    expect(commandThatWorks(argv, root, path.join(root, 'no-such-node'))).toBeUndefined();
    expect(unsupportedNode('v20.20.2', undefined)).toContain('Install one of them');
  });

  it("package.json's engines says the same as the start check", () => {
    const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe(`^${MINIMUM.major}.${MINIMUM.minor}.0 || >=24.0.0`);
  });

  it('this suite runs on a supported line', () => {
    expect(unsupportedNode(process.version)).toBeUndefined();
  });
});
