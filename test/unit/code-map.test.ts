import fs from 'node:fs';
import path from 'node:path';
import { FORMATS } from '../../src/providers/formats';

/**
 * The code map in docs/maintainers/architecture.md has one line per folder of src/. It went stale
 * once (folders listed twice, a folder that did not exist, one missing): this keeps it in step with
 * the tree. A folder is "named" by a line of the map's first code block that starts with its path.
 */
const root = path.resolve(__dirname, '../..');
const mapFile = path.join(root, 'docs/maintainers/architecture.md');

/** Every folder under src/, as `src/a/b/` (src/ itself included). */
function foldersOf(dir: string): string[] {
  const here = `${path.relative(root, dir).split(path.sep).join('/')}/`;
  const below = fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => foldersOf(path.join(dir, entry.name)));
  return [here, ...below];
}

/** The folders the code map names: the first path of each line of the first code block under "## Code map". */
function namedFolders(markdown: string): string[] {
  const section = markdown.split(/^## Code map$/m)[1];
  if (section === undefined) throw new Error('architecture.md has no "## Code map" section');
  const block = /^```[^\n]*\n([\s\S]*?)^```/m.exec(section)?.[1];
  if (block === undefined) throw new Error('the "## Code map" section has no code block');
  return block
    .split('\n')
    .map((line) => /^(src\/\S*)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined);
}

/**
 * The folders of src/providers/ that hold a wire format of the registry (formats.ts FORMATS): the
 * registry describes them (each descriptor's `title`), so the map need not name them, and a new
 * provider's folder needs no line here (docs/maintainers/adding-a-provider.md).
 */
function registryFolders(): string[] {
  const providers = path.join(root, 'src/providers');
  const registered = new Set<unknown>(FORMATS);
  return fs
    .readdirSync(providers, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .filter((entry) =>
      fs
        .readdirSync(path.join(providers, entry.name))
        .filter((file) => file.endsWith('.descriptor.ts'))
        .some((file) => Object.values(require(path.join(providers, entry.name, file)) as Record<string, unknown>).some((value) => registered.has(value))),
    )
    .map((entry) => `src/providers/${entry.name}/`);
}

describe('the code map (docs/maintainers/architecture.md)', () => {
  const named = namedFolders(fs.readFileSync(mapFile, 'utf8'));
  const actual = foldersOf(path.join(root, 'src'));
  const described = registryFolders();

  it('names only folders, each once', () => {
    expect(named.filter((name) => !name.endsWith('/'))).toEqual([]);
    expect(named.filter((name, i) => named.indexOf(name) !== i)).toEqual([]);
  });

  it('mentions every folder of src/ but the wire formats of the provider registry', () => {
    expect(actual.filter((folder) => !named.includes(folder) && !described.includes(folder))).toEqual([]);
  });

  it('leaves each wire format of the registry to it: a folder per descriptor of formats.ts FORMATS', () => {
    expect(described).toHaveLength(FORMATS.length);
    expect(described).toContain('src/providers/bfl/');
  });

  it('names no folder that does not exist', () => {
    expect(named.filter((folder) => !actual.includes(folder))).toEqual([]);
  });

  it('reads the map the way it is written (a sanity check of the parser)', () => {
    expect(namedFolders('## Code map\n\n```\nsrc/a/   x\nsrc/a/b/  y\n  src/not-a-line/\n```\n\n```\nsrc/later/\n```\n')).toEqual(['src/a/', 'src/a/b/']);
  });
});
