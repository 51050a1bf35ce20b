import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import request from 'supertest';
import YAML from 'yaml';
import { creativeOperations } from '../../generated/creative.operations';
import { gatewayOperations } from '../../generated/gateway.operations';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * The served documents are the repository's contract: a client generating an SDK from
 * openapi/*.yaml gets what one generating from /openapi.json gets. Each served document (the JSON
 * and the one the internal reference page embeds) equals the bundled YAML, and the bundling adds
 * nothing: resolving every reference of the served document and of the YAML files (with a
 * resolver of this test's own) gives the same paths, top-level fields and components.
 */

const SPEC_DIR = path.resolve(__dirname, '../../openapi');
type Json = Record<string, unknown>;

const yamlFiles = new Map<string, Json>();
function yamlFile(file: string): Json {
  let parsed = yamlFiles.get(file);
  if (!parsed) {
    parsed = YAML.parse(fs.readFileSync(file, 'utf8')) as Json;
    yamlFiles.set(file, parsed);
  }
  return parsed;
}

function atPointer(document: Json, pointer: string): unknown {
  return pointer
    .split('/')
    .slice(1)
    .reduce<unknown>((at, part) => (at as Json | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], document);
}

/**
 * Replaces every `$ref` (local or to another file, relative to `file`) by what it names. A
 * reference met again inside its own expansion (a recursive schema) becomes `{ $recursive: pointer }`
 * on both sides of a comparison alike.
 */
function resolveAll(node: unknown, file: string, load: (file: string) => Json, open: readonly string[] = []): unknown {
  if (Array.isArray(node)) return node.map((item) => resolveAll(item, file, load, open));
  if (node === null || typeof node !== 'object') return node;
  const { $ref, ...siblings } = node as Json;
  const rest = Object.fromEntries(Object.entries(siblings).map(([key, value]) => [key, resolveAll(value, file, load, open)]));
  if (typeof $ref !== 'string') return rest;
  const [target = '', pointer = ''] = $ref.split('#');
  const targetFile = target === '' ? file : path.resolve(path.dirname(file), target);
  if (open.includes(pointer)) return { $recursive: pointer, ...rest };
  const named = atPointer(load(targetFile), pointer);
  if (named === undefined) throw new Error(`${file}: ${$ref} names nothing`);
  const resolved = resolveAll(named, targetFile, load, [...open, pointer]);
  return Object.keys(rest).length === 0 ? resolved : { ...(resolved as Json), ...rest };
}

type ServerVariables = Record<string, { default: string }>;
const serverDefaults = (document: Json): Record<string, string>[] =>
  (document.servers as { variables: ServerVariables }[]).map((server) =>
    Object.fromEntries(Object.entries(server.variables).map(([name, v]) => [name, v.default])),
  );

/**
 * `served` is the contract, with one difference: its server variables default to `origin` (where
 * the request went), so "Try it" and generated examples call the deployment that served it.
 */
function expectSameContract(document: Json, name: 'gateway' | 'creative', origin: { scheme: string; authority: string }): void {
  expect(serverDefaults(document)).toEqual([origin]);
  const declared = JSON.parse(JSON.stringify(loadOpenApiDocument(name))) as Json;
  const served = {
    ...document,
    servers: (document.servers as { variables: ServerVariables }[]).map((server, index) => ({
      ...server,
      variables: Object.fromEntries(
        Object.entries(server.variables).map(([variable, value]) => [variable, { ...value, default: serverDefaults(declared)[index]?.[variable] }]),
      ),
    })),
  };
  // The bundled form the gateway loads, unchanged by serving (nor by the validator that holds it).
  expect(served).toEqual(declared);

  // The bundling adds nothing to what the YAML says.
  const root = path.join(SPEC_DIR, `${name}.yaml`);
  const source = yamlFile(root);
  const fromServed = (node: unknown) => resolveAll(node, 'served', () => served);
  const fromYaml = (node: unknown, file = root) => resolveAll(node, file, yamlFile);
  const { components: servedComponents = {}, ...servedTop } = served as Json & { components?: Record<string, Json> };
  const { components: ownComponents = {}, ...sourceTop } = source as Json & { components?: Record<string, Json> };
  expect(fromServed(servedTop)).toEqual(fromYaml(sourceTop));
  const shared = path.join(SPEC_DIR, 'shared.yaml');
  const sharedComponents = (yamlFile(shared).components ?? {}) as Record<string, Json>;
  for (const [section, entries] of Object.entries(servedComponents)) {
    for (const [component, value] of Object.entries(entries)) {
      const at = `components/${section}/${component}`;
      const own = ownComponents[section]?.[component];
      const declared = own !== undefined ? fromYaml(own) : fromYaml(sharedComponents[section]?.[component], shared);
      expect({ at, value: fromServed(value) }).toEqual({ at, value: declared });
    }
  }
}

describe('the served documents equal the contract in openapi/', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it(`${gatewayOperations.getOpenApiDocument.path} (getOpenApiDocument) is openapi/gateway.yaml, bundled`, async () => {
    const res = await request(t.gateway.url).get(gatewayOperations.getOpenApiDocument.path);
    expect(res.status).toBe(200);
    expectSameContract(res.body as Json, 'gateway', { scheme: 'http', authority: new URL(t.gateway.url).host });
  });

  it(`${creativeOperations.getCreativeOpenApiDocument.path} (getCreativeOpenApiDocument) is openapi/creative.yaml, bundled`, async () => {
    const res = await request(t.gateway.internalUrl).get(creativeOperations.getCreativeOpenApiDocument.path).set(SERVICE_TOKEN);
    expect(res.status).toBe(200);
    expectSameContract(res.body as Json, 'creative', { scheme: 'http', authority: new URL(t.gateway.internalUrl).host });
  });

  /** The configuration Scalar's page passes to `Scalar.createApiReference` (JSON, no functions). */
  const pageConfiguration = (html: string): Json => {
    const match = /Scalar\.createApiReference\('#app', ([\s\S]*)\)\s*<\/script>/.exec(html);
    if (!match?.[1]) throw new Error('no Scalar configuration in the page');
    return JSON.parse(match[1]) as Json;
  };

  it('the reference pages show the same documents: the public one loads /openapi.json, the internal one embeds creative.yaml, bundled', async () => {
    const publicPage = await request(t.gateway.url).get(gatewayOperations.getApiReference.path);
    expect(publicPage.status).toBe(200);
    expect(pageConfiguration(publicPage.text)).toMatchObject({ url: gatewayOperations.getOpenApiDocument.path });
    expect(pageConfiguration(publicPage.text)).not.toHaveProperty('content');

    const internalPage = await request(t.gateway.internalUrl).get(creativeOperations.getCreativeApiReference.path).set(SERVICE_TOKEN);
    expect(internalPage.status).toBe(200);
    expectSameContract(pageConfiguration(internalPage.text).content as Json, 'creative', { scheme: 'http', authority: new URL(t.gateway.internalUrl).host });
  });

  it('on both listeners, the documents default their server to the Host the request came to, and say so in Vary', async () => {
    const gateway = await request(t.gateway.url).get(gatewayOperations.getOpenApiDocument.path).set('Host', 'gw.example.net:9443');
    expect(serverDefaults(gateway.body as Json)).toEqual([{ scheme: 'http', authority: 'gw.example.net:9443' }]);
    expect(gateway.headers.vary).toBe('Host');
    expect(gateway.headers['cache-control']).toBe('no-cache');
    const creative = await request(t.gateway.internalUrl)
      .get(creativeOperations.getCreativeOpenApiDocument.path)
      .set(SERVICE_TOKEN)
      .set('Host', '[2001:db8::7]:8081');
    expect(serverDefaults(creative.body as Json)).toEqual([{ scheme: 'http', authority: '[2001:db8::7]:8081' }]);
    expect(creative.headers.vary).toBe('Host');
    const page = await request(t.gateway.internalUrl)
      .get(creativeOperations.getCreativeApiReference.path)
      .set(SERVICE_TOKEN)
      .set('Host', 'internal.example.net');
    expect(serverDefaults(pageConfiguration(page.text).content as Json)).toEqual([{ scheme: 'http', authority: 'internal.example.net' }]);
    expect(page.headers.vary).toBe('Host');
    // No proxy is trusted: forwarded values are not believed. A Host that is not `host[:port]` is not echoed.
    const forwarded = await request(t.gateway.url)
      .get(gatewayOperations.getOpenApiDocument.path)
      .set({ 'X-Forwarded-Host': 'evil.example', 'X-Forwarded-Proto': 'https' });
    expect(serverDefaults(forwarded.body as Json)).toEqual([{ scheme: 'http', authority: new URL(t.gateway.url).host }]);
    const odd = await request(t.gateway.url).get(gatewayOperations.getOpenApiDocument.path).set('Host', 'a"><script>x</script>');
    expect(serverDefaults(odd.body as Json)).toEqual(serverDefaults(loadOpenApiDocument('gateway')));
  });
});

describe('behind a trusted proxy (TRUSTED_PROXIES)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ TRUSTED_PROXIES: '127.0.0.1/32,::1/128' });
  });
  afterAll(() => t.close());

  it('the public document defaults to X-Forwarded-Proto and X-Forwarded-Host, and varies on them', async () => {
    const res = await request(t.gateway.url)
      .get(gatewayOperations.getOpenApiDocument.path)
      .set({ 'X-Forwarded-Host': 'api.example.net, proxy.internal', 'X-Forwarded-Proto': 'https' });
    expect(serverDefaults(res.body as Json)).toEqual([{ scheme: 'https', authority: 'api.example.net' }]);
    expect(res.headers.vary).toBe('Host, X-Forwarded-Host, X-Forwarded-Proto');
    // A scheme outside the variable's enum keeps the declared default.
    const odd = await request(t.gateway.url).get(gatewayOperations.getOpenApiDocument.path).set({ 'X-Forwarded-Proto': 'gopher' });
    expect(serverDefaults(odd.body as Json)).toEqual([{ scheme: 'http', authority: new URL(t.gateway.url).host }]);
  });
});

describe("the reference page's script (Scalar's bundle): compressed, versioned, cached for a year", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const bundle = fs.readFileSync(require.resolve('@scalar/api-reference/browser/standalone.js'));
  /** The bytes as sent (supertest and fetch would decode them). */
  const raw = (url: string, headers: Record<string, string>) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      http
        .get(url, { headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        })
        .on('error', reject);
    });

  for (const listener of ['public', 'internal'] as const) {
    it(`${listener} listener: the page names a content-versioned URL; br, gzip and identity bodies are the same bundle`, async () => {
      const base = listener === 'public' ? t.gateway.url : t.gateway.internalUrl;
      const page = await request(base)
        .get('/docs')
        .set(listener === 'internal' ? SERVICE_TOKEN : {});
      const src = /<script src="(\/docs\/scalar\.js\?v=[0-9a-f]{16})">/.exec(page.text)?.[1];
      expect(src).toBeDefined();
      const url = `${base}${src}`;
      const decoders = { br: zlib.brotliDecompressSync, gzip: zlib.gunzipSync, identity: (b: Buffer) => b };
      for (const [accept, expected] of [
        ['br, gzip', 'br'],
        ['gzip, deflate', 'gzip'],
        ['gzip;q=0.5, br;q=1', 'br'],
        ['identity', 'identity'],
        ['', 'identity'],
      ] as const) {
        const res = await raw(url, { 'Accept-Encoding': accept });
        expect({ accept, status: res.status, encoding: res.headers['content-encoding'] ?? 'identity' }).toEqual({ accept, status: 200, encoding: expected });
        expect(res.headers.vary).toBe('Accept-Encoding');
        expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
        expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
        const body = res.body;
        expect(Number(res.headers['content-length'])).toBe(body.length);
        if (expected !== 'identity') expect(body.length).toBeLessThan(bundle.length / 3);
        expect(decoders[expected](body).equals(bundle)).toBe(true);
      }
      // Any other URL of it may change under the browser: revalidated, not kept.
      const unversioned = await raw(`${base}/docs/scalar.js`, { 'Accept-Encoding': 'gzip' });
      expect(unversioned.headers['cache-control']).toBe('no-cache');
      expect(zlib.gunzipSync(unversioned.body).equals(bundle)).toBe(true);
      const stale = await raw(`${base}/docs/scalar.js?v=0000000000000000`, {});
      expect(stale.headers['cache-control']).toBe('no-cache');
    });
  }
});
