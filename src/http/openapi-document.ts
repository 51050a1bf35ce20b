import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, unknown>> };

const SHARED = './shared.yaml';

function specDirectory(): string {
  const candidates = [path.resolve(__dirname, '../../openapi'), path.resolve(__dirname, '../../../openapi')];
  const dir = candidates.find((d) => fs.existsSync(path.join(d, 'gateway.yaml')));
  if (!dir) throw new Error('openapi/ not found');
  return dir;
}

/** Rewrites `./shared.yaml#/x` references to local `#/x` ones, everywhere in the tree. */
function localiseRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(localiseRefs);
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    out[key] = key === '$ref' && typeof value === 'string' && value.startsWith(`${SHARED}#`) ? value.slice(SHARED.length) : localiseRefs(value);
  }
  return out;
}

/**
 * Reads a spec from openapi/ and bundles it into one self-contained document: the components of
 * shared.yaml are merged in and references to them made local. The validator, /openapi.json and
 * the tests all use this bundled form.
 */
export function loadOpenApiDocument(name: 'gateway' | 'creative'): OpenApiDocument {
  const dir = specDirectory();
  const doc = localiseRefs(YAML.parse(fs.readFileSync(path.join(dir, `${name}.yaml`), 'utf8'))) as OpenApiDocument & {
    components?: Record<string, Record<string, unknown>>;
  };
  const shared = localiseRefs(YAML.parse(fs.readFileSync(path.join(dir, 'shared.yaml'), 'utf8'))) as {
    components: Record<string, Record<string, unknown>>;
  };
  const components: Record<string, Record<string, unknown>> = { ...(doc.components ?? {}) };
  for (const [section, entries] of Object.entries(shared.components)) {
    components[section] = { ...entries, ...(components[section] ?? {}) };
  }
  return { ...doc, components };
}
