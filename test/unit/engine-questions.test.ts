import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * Code asks what the database can do (src/db/storage-capabilities.ts), not which engine it is: the
 * dialect's adapter is told apart only by capabilitiesOf(), and engine names are compared, and the
 * engine type taken, only in src/db/ (openDatabase, the migrations, which are history).
 */
const root = path.resolve(__dirname, '../..');
const CAPABILITIES_FILE = 'src/db/storage-capabilities.ts';
const DB_FOLDER = 'src/db/';

type QuestionKind = 'adapter check' | 'engine comparison' | 'engine type';

/** Where a source asks which engine it runs on, as `file:line kind`. */
function engineQuestions(source: string, fileName = 'file.ts'): { at: string; kind: QuestionKind }[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: { at: string; kind: QuestionKind }[] = [];
  const at = (node: ts.Node) => `${fileName}:${file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1}`;
  const namesAdapter = (node: ts.Node) => /(^|\.)(Postgres|Sqlite)Adapter$/.test(node.getText(file));
  const namesEngine = (node: ts.Node) => /engine/i.test(node.getText(file));
  const isEngineName = (node: ts.Node) => ts.isStringLiteralLike(node) && (node.text === 'postgres' || node.text === 'sqlite');
  const EQUALITY = new Set([
    ts.SyntaxKind.EqualsEqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsEqualsToken,
    ts.SyntaxKind.EqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsToken,
  ]);
  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.InstanceOfKeyword && namesAdapter(node.right)) {
      found.push({ at: at(node), kind: 'adapter check' });
    } else if (ts.isBinaryExpression(node) && EQUALITY.has(node.operatorToken.kind)) {
      const [literal, other] = isEngineName(node.right) ? [node.right, node.left] : [node.left, node.right];
      if (isEngineName(literal) && namesEngine(other)) found.push({ at: at(node), kind: 'engine comparison' });
    } else if (ts.isSwitchStatement(node) && namesEngine(node.expression)) {
      found.push({ at: at(node), kind: 'engine comparison' });
    } else if (ts.isTypeReferenceNode(node) && node.typeName.getText(file) === 'DatabaseEngine') {
      found.push({ at: at(node), kind: 'engine type' });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** Why `kind` is not allowed in `file` (relative to the repository, with `/`); undefined where it is. */
function refusal(file: string, kind: QuestionKind): string | undefined {
  if (kind === 'adapter check') return file === CAPABILITIES_FILE ? undefined : `ask capabilitiesOf(db) (${CAPABILITIES_FILE})`;
  return file.startsWith(DB_FOLDER) ? undefined : 'ask database.capabilities or capabilitiesOf(db) for what the code needs';
}

function sourceFiles(folder: string): string[] {
  return fs.readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

describe('code asks the database for capabilities, not for its engine', () => {
  it('finds every form of the question, and not a mention in a comment or a string', () => {
    const kinds = (source: string) => engineQuestions(source).map((question) => `${question.at} ${question.kind}`);
    expect(kinds('const a = db.getExecutor().adapter instanceof PostgresAdapter;\nconst b = x instanceof kysely.SqliteAdapter;')).toEqual([
      'file.ts:1 adapter check',
      'file.ts:2 adapter check',
    ]);
    expect(
      kinds(
        [
          "if (engine === 'postgres') {}",
          "const b = this.engine !== 'sqlite';",
          "const c = 'postgres' == database.engine;",
          "const d = engineOf(url) === 'postgres';",
          'switch (options.engine) {}',
        ].join('\n'),
      ),
    ).toEqual([
      'file.ts:1 engine comparison',
      'file.ts:2 engine comparison',
      'file.ts:3 engine comparison',
      'file.ts:4 engine comparison',
      'file.ts:5 engine comparison',
    ]);
    expect(kinds("function f(engine: DatabaseEngine) {}\nimport type { DatabaseEngine } from './database';")).toEqual(['file.ts:1 engine type']);
    expect(
      kinds(
        [
          "// if (engine === 'postgres')",
          "const s = 'x instanceof PostgresAdapter';",
          "const t = scheme === 'postgres';",
          'const u = capabilitiesOf(db).rowLocks;',
          'const v = x instanceof Error;',
        ].join('\n'),
      ),
    ).toEqual([]);
  });

  it('allows the adapter check in storage-capabilities.ts only, and engine names in src/db/ only', () => {
    expect(refusal(CAPABILITIES_FILE, 'adapter check')).toBeUndefined();
    expect(refusal('src/db/database.ts', 'adapter check')).toMatch(/capabilitiesOf/);
    expect(refusal('src/db/migrations/0004_internal_generations.ts', 'engine comparison')).toBeUndefined();
    expect(refusal('src/db/database.ts', 'engine type')).toBeUndefined();
    expect(refusal('src/generation/durable.repository.ts', 'engine comparison')).toMatch(/capabilities/);
    expect(refusal('src/server.ts', 'engine type')).toMatch(/capabilities/);
  });

  it('no module of src/ asks where it may not', () => {
    const files = sourceFiles(path.join(root, 'src')).map((file) => path.relative(root, file).split(path.sep).join('/'));
    expect(files).toContain(CAPABILITIES_FILE);
    const refused = files.flatMap((file) =>
      engineQuestions(fs.readFileSync(path.join(root, file), 'utf8'), file)
        .map((question) => ({ ...question, why: refusal(file, question.kind) }))
        .filter((question) => question.why !== undefined)
        .map((question) => `${question.at} ${question.kind}: ${question.why}`),
    );
    expect(refused).toEqual([]);
  });

  it('finds the one adapter check, in storage-capabilities.ts', () => {
    const source = fs.readFileSync(path.join(root, CAPABILITIES_FILE), 'utf8');
    expect(engineQuestions(source, CAPABILITIES_FILE).map((question) => question.kind)).toEqual(['adapter check']);
  });
});
