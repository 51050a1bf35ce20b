import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

interface LockEntry {
  license?: string;
  dev?: boolean;
  devOptional?: boolean;
  dependencies?: Record<string, string>;
}
interface PackageJson {
  name?: string;
  license?: string | { type: string };
  licenses?: { type: string }[];
  dependencies?: Record<string, string>;
}

/** The first column of the markdown table under `heading` in docs/maintainers/licences.md. */
function tableColumn(heading: string): string[] {
  const page = readFileSync(path.join(root, 'docs/maintainers/licences.md'), 'utf8');
  const section = page.split(/^## /m).find((part) => part.startsWith(heading));
  if (!section) throw new Error(`docs/maintainers/licences.md has no "## ${heading}" section`);
  return section
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| ---'))
    .slice(1)
    .map((line) => line.split('|')[1]!.trim());
}

function declaredLicence(manifest: PackageJson): string | undefined {
  if (typeof manifest.license === 'string') return manifest.license;
  if (manifest.license) return manifest.license.type;
  if (manifest.licenses?.length) return manifest.licenses.map((entry) => entry.type).join(' OR ');
  return undefined;
}

/** True when one OR branch of the SPDX expression has all its AND terms allowed. */
function expressionAllowed(expression: string, allowed: ReadonlySet<string>): boolean {
  const bare = expression.replace(/[()]/g, ' ');
  return bare.split(/\s+OR\s+/).some((branch) =>
    branch
      .split(/\s+AND\s+/)
      .map((term) => term.trim())
      .every((term) => allowed.has(term)),
  );
}

/** The installed manifest of `name` as seen from `fromDir` (Node's lookup: nearest node_modules upward). */
function resolveManifest(name: string, fromDir: string): { dir: string; manifest: PackageJson } | undefined {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name, 'package.json');
    if (existsSync(candidate)) return { dir: path.dirname(candidate), manifest: readJson<PackageJson>(candidate) };
    if (dir === root || dir === path.dirname(dir)) return undefined;
  }
}

function bareImports(dir: string): Set<string> {
  const names = new Set<string>();
  for (const entry of readdirSync(dir)) {
    const file = path.join(dir, entry);
    if (statSync(file).isDirectory()) {
      for (const name of bareImports(file)) names.add(name);
    } else if (/\.tsx?$/.test(entry)) {
      for (const match of readFileSync(file, 'utf8').matchAll(/from '([^.'][^']*)'/g)) {
        const specifier = match[1]!;
        names.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!);
      }
    }
  }
  return names;
}

/** name → licence of every package shipped in production: the lock file's non-dev tree and the console's bundle. */
function shippedPackages(): Map<string, string | undefined> {
  const shipped = new Map<string, string | undefined>();
  const lock = readJson<{ packages: Record<string, LockEntry> }>(path.join(root, 'package-lock.json'));
  for (const [location, entry] of Object.entries(lock.packages)) {
    if (location === '' || entry.dev || entry.devOptional) continue;
    const name = location.slice(location.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const manifestFile = path.join(root, location, 'package.json');
    const licence = entry.license ?? (existsSync(manifestFile) ? declaredLicence(readJson<PackageJson>(manifestFile)) : undefined);
    shipped.set(name, licence);
  }
  const pending = [...bareImports(path.join(root, 'console/src'))].map((name) => ({ name, from: root }));
  while (pending.length > 0) {
    const { name, from } = pending.pop()!;
    const found = resolveManifest(name, from);
    if (!found || shipped.has(name)) continue;
    shipped.set(name, declaredLicence(found.manifest));
    for (const dependency of Object.keys(found.manifest.dependencies ?? {})) pending.push({ name: dependency, from: found.dir });
  }
  return shipped;
}

describe('licences of what ships in production', () => {
  const allowed = new Set(tableColumn('Licences compatible with Apache-2.0'));
  const exceptions = new Set(tableColumn('Exceptions'));
  const shipped = shippedPackages();

  it('the gateway itself is Apache-2.0, with the licence text at the root', () => {
    expect(readJson<PackageJson>(path.join(root, 'package.json')).license).toBe('Apache-2.0');
    expect(readFileSync(path.join(root, 'LICENSE'), 'utf8')).toContain('Apache License\n                           Version 2.0, January 2004');
  });

  it('reads a real production tree and the console bundle', () => {
    for (const name of ['express', 'kysely', 'better-sqlite3', 'preact', 'uplot']) expect(shipped.has(name)).toBe(true);
    expect(shipped.has('jest')).toBe(false);
  });

  it('every shipped package has a licence compatible with Apache-2.0, or is a listed exception', () => {
    const refused = [...shipped]
      .filter(([name, licence]) => !exceptions.has(name) && !(licence && expressionAllowed(licence, allowed)))
      .map(([name, licence]) => `${name}: ${licence ?? 'no licence declared'}`);
    expect(refused).toEqual([]);
  });

  it('every listed exception still ships (a stale exception is removed)', () => {
    expect([...exceptions].filter((name) => !shipped.has(name))).toEqual([]);
  });

  it('an SPDX expression passes through one fully allowed OR branch only', () => {
    const mit = new Set(['MIT', 'BSD-3-Clause']);
    expect(expressionAllowed('(AFL-2.1 OR BSD-3-Clause)', mit)).toBe(true);
    expect(expressionAllowed('MIT AND GPL-3.0', mit)).toBe(false);
    expect(expressionAllowed('GPL-3.0', mit)).toBe(false);
  });
});
