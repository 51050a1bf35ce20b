import fs from 'node:fs';
import path from 'node:path';
import { CORE_SCHEMA, load } from 'js-yaml';

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

type Json = Record<string, unknown>;

/** Follows local references to the object they name. */
function follow(document: Json, node: unknown): Json {
  let value = node as Json;
  while (typeof value?.$ref === 'string' && value.$ref.startsWith('#/')) {
    value = value.$ref
      .slice(2)
      .split('/')
      .reduce<unknown>((at, part) => (at as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')], document) as Json;
  }
  return value;
}

/** Drops components nothing references (shared.yaml offers more than each API uses). */
function pruneUnusedComponents(document: Json): void {
  const components = document.components as Record<string, Json>;
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/') && !used.has(value)) {
          used.add(value);
          visit(follow(document, { $ref: value }));
        } else visit(value);
      }
    }
  };
  visit({ ...document, components: undefined });
  for (const [section, entries] of Object.entries(components)) {
    if (section === 'securitySchemes') continue; // used by name in `security`, never by $ref
    for (const name of Object.keys(entries)) if (!used.has(`#/components/${section}/${name}`)) delete entries[name];
    if (Object.keys(entries).length === 0) delete components[section];
  }
}

/**
 * Reads a spec from openapi/ and bundles it into one self-contained document: the components of
 * shared.yaml are merged in and references to them made local, and unused components are dropped.
 * Nothing else changes: the served documents say what the YAML says (test/contract/served-documents.test.ts).
 * The validator, /openapi.json and the tests all use this bundled form.
 */
export function loadOpenApiDocument(name: 'gateway' | 'creative'): OpenApiDocument {
  let bundled = bundledDocuments.get(name);
  if (!bundled) {
    bundled = bundleDocument(name);
    bundledDocuments.set(name, bundled);
  }
  // A copy: callers (the validator, the router) may annotate theirs.
  return structuredClone(bundled);
}

/** Parsed once per process: every gateway a test process starts, and the tests, read the same files. */
const bundledDocuments = new Map<'gateway' | 'creative', OpenApiDocument>();

/**
 * YAML 1.2's core schema (what the `yaml` package reads by default; test/contract/served-documents.test.ts
 * compares with it): js-yaml parses the specs about ten times faster, which every gateway start pays.
 */
function parseYaml(file: string): unknown {
  return load(fs.readFileSync(file, 'utf8'), { schema: CORE_SCHEMA });
}

function bundleDocument(name: 'gateway' | 'creative'): OpenApiDocument {
  const dir = specDirectory();
  const doc = localiseRefs(parseYaml(path.join(dir, `${name}.yaml`))) as OpenApiDocument & {
    components?: Record<string, Record<string, unknown>>;
  };
  const shared = localiseRefs(parseYaml(path.join(dir, 'shared.yaml'))) as {
    components: Record<string, Record<string, unknown>>;
  };
  const components: Record<string, Record<string, unknown>> = { ...(doc.components ?? {}) };
  for (const [section, entries] of Object.entries(shared.components)) {
    components[section] = { ...entries, ...(components[section] ?? {}) };
  }
  const bundled = { ...doc, components } as OpenApiDocument;
  pruneUnusedComponents(bundled);
  return bundled;
}

type ServerVariable = { default: string; enum?: string[] };
type Server = { url: string; variables?: Record<string, ServerVariable> };

/**
 * The document as served to one request: the `scheme` and `authority` server variables default to
 * the origin the request came to, so "Try it" and generated examples call this deployment. Nothing
 * else differs (a shallow copy: the loaded document is shared).
 */
export function withServerDefaults(document: OpenApiDocument, origin: { scheme: string; authority: string } | undefined): OpenApiDocument {
  const servers = document.servers as Server[] | undefined;
  if (origin === undefined || servers === undefined) return document;
  const defaults: Record<string, string> = { scheme: origin.scheme, authority: origin.authority };
  return {
    ...document,
    servers: servers.map((server) => {
      if (server.variables === undefined) return server;
      const variables = Object.fromEntries(
        Object.entries(server.variables).map(([name, variable]) => {
          const value = defaults[name];
          const allowed = value !== undefined && (variable.enum === undefined || variable.enum.includes(value));
          return [name, allowed ? { ...variable, default: value } : variable];
        }),
      );
      return { ...server, variables };
    }),
  };
}
