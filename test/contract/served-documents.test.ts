import fs from 'node:fs';
import path from 'node:path';
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

function expectSameContract(served: Json, name: 'gateway' | 'creative'): void {
  // The bundled form the gateway loads, unchanged by serving (nor by the validator that holds it).
  expect(served).toEqual(JSON.parse(JSON.stringify(loadOpenApiDocument(name))));

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
    expectSameContract(res.body as Json, 'gateway');
  });

  it(`${creativeOperations.getCreativeOpenApiDocument.path} (getCreativeOpenApiDocument) is openapi/creative.yaml, bundled`, async () => {
    const res = await request(t.gateway.internalUrl).get(creativeOperations.getCreativeOpenApiDocument.path).set(SERVICE_TOKEN);
    expect(res.status).toBe(200);
    expectSameContract(res.body as Json, 'creative');
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
    expectSameContract(pageConfiguration(internalPage.text).content as Json, 'creative');
  });
});
