import fs from 'node:fs';
import path from 'node:path';
import type { Express } from 'express';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: Layer[] } };

/** Every "METHOD /path/:param" an Express app routes, through nested routers. */
function routesOf(app: Express): Set<string> {
  const found = new Set<string>();
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) for (const method of Object.keys(layer.route.methods)) found.add(`${method.toUpperCase()} ${layer.route.path}`);
      else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return found;
}

function operationsOf(name: 'gateway' | 'creative'): Array<{ operationId: string; route: string }> {
  const doc = loadOpenApiDocument(name);
  return Object.entries(doc.paths).flatMap(([template, item]) =>
    Object.entries(item)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, operation]) => ({
        operationId: (operation as { operationId: string }).operationId,
        route: `${method.toUpperCase()} ${template.replace(/\{([^}]+)\}/g, ':$1')}`,
      })),
  );
}

const testSources = (() => {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.test.ts') && full !== __filename) files.push(fs.readFileSync(full, 'utf8'));
    }
  };
  walk(path.resolve(__dirname, '..'));
  return files.join('\n');
})();

describe('every operation in both specs has a route and a test', () => {
  let t: TestGateway;
  let routes: Record<'gateway' | 'creative', Set<string>>;
  beforeAll(async () => {
    t = await startTestGateway();
    routes = { gateway: routesOf(t.gateway.apps.public), creative: routesOf(t.gateway.apps.internal) };
  });
  afterAll(() => t.close());

  for (const name of ['gateway', 'creative'] as const) {
    it(`${name}: a route for each operation`, () => {
      const missing = operationsOf(name).filter((op) => !routes[name].has(op.route));
      expect(missing).toEqual([]);
    });

    it(`${name}: a test names each operationId`, () => {
      const untested = operationsOf(name).filter((op) => !testSources.includes(op.operationId));
      expect(untested).toEqual([]);
    });
  }
});
