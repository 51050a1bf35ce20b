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

type Json = Record<string, unknown>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

/**
 * Headers the gateway's layers put on many responses, declared once in shared.yaml's
 * components/headers and added here to every response that carries them, so the served document
 * declares each header each response sends (and a new operation gets them by declaration):
 * - every response: `X-Request-Id` (request-id.ts);
 * - `x-rate-limited: true` operations: the key's rate-limit headers on every response except 401
 *   (no key, so no limit) and 408/413 (refused by the body guard before the key is read), always
 *   on 2xx/4xx, on 5xx when the limiter answered;
 * - `x-idempotent: true` operations: `Idempotent-Replayed` on the outcomes that are kept and replayed.
 */
function layerHeaders(document: Json, operation: Json, status: string): Record<string, unknown> {
  const headers: Record<string, unknown> = { 'X-Request-Id': header('XRequestId') };
  const code = Number(status);
  // 408 and 413 are answered by the body guard (body-deadline.ts) before any key is known.
  if (operation['x-rate-limited'] === true && ![401, 408, 413].includes(code)) {
    const always = code < 500;
    for (const [name, component] of [
      ['RateLimit-Policy', 'RateLimitPolicy'],
      ['RateLimit', 'RateLimit'],
      ['X-RateLimit-Limit', 'XRateLimitLimit'],
      ['X-RateLimit-Remaining', 'XRateLimitRemaining'],
      ['X-RateLimit-Reset', 'XRateLimitReset'],
    ] as const) {
      headers[name] = always ? header(component) : { ...follow(document, header(component)).value, required: false };
    }
  }
  if (operation['x-idempotent'] === true && code < 500 && ![401, 409, 413, 415, 429].includes(code)) {
    headers['Idempotent-Replayed'] = header('IdempotentReplayed');
  }
  return headers;
}

/** Follows local references to the object they name; `ref` is the last one followed. */
function follow(document: Json, node: unknown): { value: Json; ref?: string } {
  let value = node as Json;
  let ref: string | undefined;
  while (typeof value?.$ref === 'string' && value.$ref.startsWith('#/')) {
    ref = value.$ref;
    value = ref
      .slice(2)
      .split('/')
      .reduce<unknown>((at, part) => (at as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')], document) as Json;
  }
  return { value, ref };
}

function addLayerHeaders(document: Json & { paths: Record<string, Json> }): void {
  const components = document.components as Record<string, Json>;
  const responses = (components.responses ?? {}) as Record<string, Json>;
  for (const item of Object.values(document.paths)) {
    for (const method of METHODS) {
      const operation = item[method] as Json | undefined;
      if (!operation?.responses) continue;
      const own = operation.responses as Record<string, unknown>;
      for (const [status, response] of Object.entries(own)) {
        const wanted = layerHeaders(document, operation, status);
        const { value, ref } = follow(document, response);
        const existing = (value.headers ?? {}) as Json;
        const missing = Object.keys(wanted).filter((name) => !(name in existing));
        if (missing.length === 0) continue;
        const merged = { ...value, headers: { ...existing, ...Object.fromEntries(missing.map((name) => [name, wanted[name]])) } };
        // X-Request-Id alone goes into a shared response itself; operation-specific headers make a copy.
        if (ref && missing.every((name) => name === 'X-Request-Id')) responses[ref.split('/').pop() as string] = merged;
        else own[status] = merged;
      }
    }
  }
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
          visit(follow(document, { $ref: value }).value);
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
 * shared.yaml are merged in and references to them made local, the layers' headers are declared
 * on the responses that carry them, and unused components are dropped. The validator,
 * /openapi.json and the tests all use this bundled form.
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
  const bundled = { ...doc, components } as OpenApiDocument;
  addLayerHeaders(bundled);
  pruneUnusedComponents(bundled);
  return bundled;
}
