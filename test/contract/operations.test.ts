import fs from 'node:fs';
import path from 'node:path';
import type { Express } from 'express';
import request from 'supertest';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { specRouter } from '../../src/http/spec-router';
import { ADMIN_SECRET, SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';

type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: Layer[] } };

/** Every "METHOD /path/:param" an Express app routes, through nested routers. */
function routesOf(app: Express): string[] {
  const found: string[] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) for (const method of Object.keys(layer.route.methods)) found.push(`${method.toUpperCase()} ${layer.route.path}`);
      else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return found.sort();
}

interface SpecOperation {
  operationId: string;
  method: string;
  template: string;
  route: string;
  security: Array<Record<string, string[]>>;
  requestBody: boolean;
}

function operationsOf(name: 'gateway' | 'creative'): SpecOperation[] {
  const doc = loadOpenApiDocument(name);
  return Object.entries(doc.paths).flatMap(([template, item]) =>
    Object.entries(item)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, operation]) => {
        const op = operation as { operationId: string; security?: Array<Record<string, string[]>>; requestBody?: unknown };
        return {
          operationId: op.operationId,
          method,
          template,
          route: `${method.toUpperCase()} ${template.replace(/\{([^}]+)\}/g, ':$1')}`,
          security: op.security ?? (doc.security as Array<Record<string, string[]>> | undefined) ?? [],
          requestBody: op.requestBody !== undefined,
        };
      }),
  );
}

function sourcesUnder(dir: string, suffix: string): Array<{ file: string; text: string }> {
  const files: Array<{ file: string; text: string }> = [];
  const walk = (at: string) => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(suffix)) files.push({ file: path.relative(path.resolve(__dirname, '../..'), full), text: fs.readFileSync(full, 'utf8') });
    }
  };
  walk(dir);
  return files;
}

/** Credentials that satisfy one of an operation's security requirements. */
function credentialsFor(op: SpecOperation, clientKey: string): Record<string, string> {
  const schemes = op.security.flatMap((requirement) => Object.keys(requirement));
  if (schemes.includes('ApiKey')) return { Authorization: `Bearer ${clientKey}` };
  if (schemes.includes('AdminSecret')) return { Authorization: `Bearer ${ADMIN_SECRET}` };
  if (schemes.includes('ServiceTokenId')) return SERVICE_TOKEN;
  return {};
}

describe('routes are mounted from the specs, and only from them', () => {
  let t: TestGateway;
  let clientKey: string;
  beforeAll(async () => {
    t = await startTestGateway();
    clientKey = (await t.createKey()).key;
  });
  afterAll(() => t.close());

  const apps = { gateway: () => t.gateway.apps.public, creative: () => t.gateway.apps.internal };
  const urls = { gateway: () => t.gateway.url, creative: () => t.gateway.internalUrl };

  for (const name of ['gateway', 'creative'] as const) {
    it(`${name}: the mounted routes are exactly the spec's operations`, () => {
      // Besides the spec's operations, only the Scalar bundle (the one static asset, src/http/docs.ts).
      const staticAssets = ['GET /scalar.js'];
      expect(routesOf(apps[name]())).toEqual([...operationsOf(name).map((op) => op.route), ...staticAssets].sort());
    });

    it(`${name}: HEAD answers as GET without a body on every GET operation`, async () => {
      for (const op of operationsOf(name).filter((o) => o.method === 'get')) {
        const url = op.template.replace(/\{[^}]+\}/g, 'x_unknown');
        const headers = credentialsFor(op, clientKey);
        const get = await request(urls[name]()).get(url).set(headers);
        const head = await request(urls[name]()).head(url).set(headers);
        expect({ op: op.operationId, status: head.status }).toEqual({ op: op.operationId, status: get.status });
        expect(head.text ?? '').toBe('');
        expect(head.headers['content-type']).toBe(get.headers['content-type']);
      }
      // Two requests for each of some 60 GET operations, the docs bundle among them.
    }, 90_000);

    it(`${name}: every operation without a body refuses a query parameter it does not declare, 400 naming it`, async () => {
      // With a body, the body's own checks come first (415 for none). An operation only a console
      // session opens needs a sign-in at an OpenID Provider: test/console-sso checks its 400.
      const sessionOnly = (o: SpecOperation) => o.security.length > 0 && o.security.every((requirement) => 'ConsoleSession' in requirement);
      for (const op of operationsOf(name).filter((o) => !o.requestBody && !sessionOnly(o))) {
        const url = `${op.template.replace(/\{[^}]+\}/g, 'x_unknown')}?undeclared=1`;
        const res = await (name === 'gateway' ? t.api : t.internal).send(op.method as 'get', url, { headers: credentialsFor(op, clientKey) });
        expect({ op: op.operationId, status: res.status, param: res.body.error?.param }).toEqual({ op: op.operationId, status: 400, param: 'undeclared' });
      }
    });

    it(`${name}: OPTIONS on every path answers 204 with Allow listing its methods`, async () => {
      const byTemplate = new Map<string, string[]>();
      for (const op of operationsOf(name)) byTemplate.set(op.template, [...(byTemplate.get(op.template) ?? []), op.method.toUpperCase()]);
      for (const [template, methods] of byTemplate) {
        const res = await request(urls[name]()).options(template.replace(/\{[^}]+\}/g, 'x_1'));
        expect(res.status).toBe(204);
        const allow = (res.headers.allow as string).split(', ');
        for (const method of methods) expect(allow).toContain(method);
        if (methods.includes('GET')) expect(allow).toContain('HEAD');
        expect(allow).toContain('OPTIONS');
      }
    });
  }

  it('the guard comes from the operation: the admin secret does not open client or internal operations', async () => {
    const asAdmin = { Authorization: `Bearer ${ADMIN_SECRET}` };
    expect((await t.api.send('post', '/images/generate', { headers: asAdmin, body: {} })).body.error.code).toBe('invalid_api_key');
    expect((await t.api.send('get', '/admin/keys', { headers: { Authorization: `Bearer ${clientKey}` } })).body.error.code).toBe('invalid_admin_secret');
    expect((await t.internal.send('get', '/docs', { headers: asAdmin })).body.error.code).toBe('missing_service_token');
    // Operations whose security is empty need nothing.
    expect((await t.internal.send('get', '/metrics')).status).toBe(200);
  });

  it('startup fails when an operation has no handler or a handler has no operation', () => {
    const document = loadOpenApiDocument('creative');
    const common = { document, guards: {}, layers: [], bodyParser: (_q: unknown, _s: unknown, next: () => void) => next(), validator: [] };
    expect(() => specRouter({ ...common, handlers: {} })).toThrow(/operations without a handler \[listModels, /);
    const all = Object.fromEntries(operationsOf('creative').map((op) => [op.operationId, () => ({ status: 200, body: {} })]));
    expect(() => specRouter({ ...common, handlers: { ...all, listWidgets: () => undefined } })).toThrow(/handlers without an operation \[listWidgets\]/);
  });

  it('src/ holds no route path literal outside the one static-asset place', () => {
    const firstSegments = new Set(
      [...operationsOf('gateway'), ...operationsOf('creative')].map((op) => op.template.split('/')[1]).filter((s): s is string => !!s),
    );
    const literal = new RegExp(`['"\`]/(${[...firstSegments].map((s) => s.replace('.', '\\.')).join('|')})\\b`);
    const offenders = sourcesUnder(path.resolve(__dirname, '../../src'), '.ts')
      .filter((f) => f.file !== path.join('src', 'http', 'docs.ts'))
      .flatMap((f) => f.text.split('\n').map((line, i) => ({ where: `${f.file}:${i + 1}`, line })))
      .filter(({ line }) => literal.test(line));
    expect(offenders).toEqual([]);
  });
});
