import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * The environment is read in one place: src/config/ parses and checks it into GatewayConfig, and the
 * CLI (src/cli/) reads the variables its commands take. Anywhere else a read of `process.env` would be
 * a setting the schema does not declare, the reference does not list and tests cannot set.
 */
const root = path.resolve(__dirname, '../..');
const ALLOWED_FOLDERS = ['src/config/', 'src/cli/'];

/** Where a source reads `process.env`: `process.env`, `process['env']`, `const { env } = process`. */
function environmentReads(source: string, fileName = 'file.ts'): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const isProcess = (node: ts.Node): boolean => /(^|\.)process$/.test(node.getText(file));
  const at = (node: ts.Node) => `${fileName}:${file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1}`;
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAccessExpression(node) && node.name.text === 'env' && isProcess(node.expression)) found.push(at(node));
    else if (
      ts.isElementAccessExpression(node) &&
      ts.isStringLiteralLike(node.argumentExpression) &&
      node.argumentExpression.text === 'env' &&
      isProcess(node.expression)
    )
      found.push(at(node));
    else if (ts.isVariableDeclaration(node) && node.initializer && isProcess(node.initializer) && ts.isObjectBindingPattern(node.name)) {
      if (node.name.elements.some((element) => (element.propertyName ?? element.name).getText(file) === 'env')) found.push(at(node));
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

function sourceFiles(folder: string): string[] {
  return fs.readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

describe('the environment is read only by src/config/ and src/cli/', () => {
  it('finds every form of reading it, and not a mention in a comment or a string', () => {
    expect(environmentReads('const a = process.env.A;')).toEqual(['file.ts:1']);
    expect(environmentReads("const a = process['env'];\nconst b = globalThis.process.env;")).toEqual(['file.ts:1', 'file.ts:2']);
    expect(environmentReads('const { env } = process;\nconst { env: e, argv } = process;')).toEqual(['file.ts:1', 'file.ts:2']);
    expect(environmentReads("// process.env.A\nconst s = 'process.env';\nconst { argv } = process;\nconst env = other.env;")).toEqual([]);
  });

  it('no module of src/ outside them reads it', () => {
    const reads = sourceFiles(path.join(root, 'src'))
      .map((file) => path.relative(root, file).split(path.sep).join('/'))
      .filter((file) => !ALLOWED_FOLDERS.some((folder) => file.startsWith(folder)))
      .flatMap((file) => environmentReads(fs.readFileSync(path.join(root, file), 'utf8'), file));
    expect(reads).toEqual([]);
  });
});
