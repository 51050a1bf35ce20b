import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * A migration is history: it must create tomorrow what it created the day it was written. Importing
 * live code (a column list, a SQL helper) from a feature folder would let an edit there rewrite it, so
 * a migration imports only kysely and files of src/db/ (each keeps its own copy of the values it used).
 */
const root = path.resolve(__dirname, '../..');
const dbFolder = path.join(root, 'src/db');
const migrationsFolder = path.join(dbFolder, 'migrations');
/** Packages a migration may import: the query builder it is written with. */
const ALLOWED_PACKAGES = new Set(['kysely']);

/** Every module specifier of a TypeScript source: imports, re-exports, `import()`, `require()`, `import x = require()`. */
function importSpecifiers(source: string, fileName = 'file.ts'): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteralLike(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteralLike(expression)) found.push(expression.text);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const isImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      const [first] = node.arguments;
      if ((isImport || isRequire) && first !== undefined) {
        // A computed specifier cannot be checked: reported as such, so it fails below.
        found.push(ts.isStringLiteralLike(first) ? first.text : `<computed: ${first.getText(file)}>`);
      }
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** Why `specifier`, imported by a file of `fromFolder`, is not allowed in a migration; undefined when it is. */
function refusal(specifier: string, fromFolder: string): string | undefined {
  if (specifier.startsWith('.')) {
    const target = path.resolve(fromFolder, specifier);
    return target === dbFolder || target.startsWith(`${dbFolder}${path.sep}`) ? undefined : `${specifier} is outside src/db/`;
  }
  return ALLOWED_PACKAGES.has(specifier) ? undefined : `${specifier} is not an allowed package (${[...ALLOWED_PACKAGES].join(', ')})`;
}

describe('migrations are self-contained', () => {
  it('finds every kind of import (the parser the check relies on)', () => {
    const source = [
      "import { a } from 'kysely';",
      "import type { B } from '../database';",
      "export { c } from '../../usage/x';",
      "import d = require('../../e');",
      "const f = require('../../f');",
      "const g = await import('../../g');",
      "type H = import('../../h').H;",
      'const i = require(name);',
      "// import { no } from 'comment';",
      'const text = "import { no } from \'string\'";',
    ].join('\n');
    expect(importSpecifiers(source)).toEqual(['kysely', '../database', '../../usage/x', '../../e', '../../f', '../../g', '../../h', '<computed: name>']);
  });

  it('refuses a feature folder and unknown packages, allows src/db/ and kysely', () => {
    expect(refusal('../../usage/latency-histogram', migrationsFolder)).toMatch(/outside src\/db/);
    expect(refusal('../../db-helpers/x', migrationsFolder)).toMatch(/outside src\/db/);
    expect(refusal('lodash', migrationsFolder)).toMatch(/not an allowed package/);
    expect(refusal('../database', migrationsFolder)).toBeUndefined();
    expect(refusal('./0001_keys_and_generations', migrationsFolder)).toBeUndefined();
    expect(refusal('kysely', migrationsFolder)).toBeUndefined();
  });

  const files = fs
    .readdirSync(migrationsFolder)
    .filter((name) => name.endsWith('.ts'))
    .sort();

  it('reads the migrations folder', () => {
    expect(files.length).toBeGreaterThan(20);
  });

  it.each(files)('%s imports only kysely and src/db/', (name) => {
    const source = fs.readFileSync(path.join(migrationsFolder, name), 'utf8');
    const refused = importSpecifiers(source, name)
      .map((specifier) => refusal(specifier, migrationsFolder))
      .filter((reason): reason is string => reason !== undefined);
    expect(refused).toEqual([]);
  });
});
