import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { gatewayOperations } from '../../generated/gateway.operations';
import { CONSOLE_CSP, consoleHandlers } from '../../src/console/console.handlers';
import { errorHandler } from '../../src/errors/error-handler';
import { startJwksServer } from '../helpers/access-jwt';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

const { buildConsoleIfStale } = require('../helpers/global-setup-console') as { buildConsoleIfStale: () => void };

const consolePath = gatewayOperations.getConsole.path;

describe('the operator console is served at /console (getConsole, getConsoleFile)', () => {
  let t: TestGateway;
  let builtFiles: string[];
  beforeAll(async () => {
    buildConsoleIfStale();
    builtFiles = fs.readdirSync(path.resolve(__dirname, '../../dist/console'));
    t = await startTestGateway();
  }, 120_000);
  afterAll(() => t?.close());

  it('the page: HTML, no-cache, a CSP allowing only this origin and no inline script', async () => {
    const res = await t.api.send('get', consolePath);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("default-src 'self'");
    expect(CONSOLE_CSP).toContain("script-src 'self';");
    expect(CONSOLE_CSP).not.toContain('unsafe-inline');
    expect(res.text).toContain('<div id="app">');
    // Nothing the page loads comes from another origin.
    expect(res.text).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it('a console page (a name without an extension) is the same HTML page: client-side routes survive a reload', async () => {
    for (const page of ['keys', 'audit-log', 'admin-tokens']) {
      const res = await t.api.send('get', `${consolePath}/${page}`);
      expect([page, res.status, res.headers['cache-control']]).toEqual([page, 200, 'no-cache']);
      expect(res.text).toContain('<div id="app">');
    }
  });

  it('hashed files: their content type, immutable for a year, under the same CSP', async () => {
    const script = builtFiles.find((file) => file.endsWith('.js'));
    const style = builtFiles.find((file) => file.endsWith('.css'));
    for (const [file, type] of [
      [script, /^text\/javascript/],
      [style, /^text\/css/],
    ] as const) {
      const res = await t.api.send('get', `${consolePath}/${file}`);
      expect([file, res.status, res.headers['cache-control']]).toEqual([file, 200, 'public, max-age=31536000, immutable']);
      expect(res.headers['content-type']).toMatch(type);
      expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
      // Only the headers the spec declares (no ETag / Last-Modified / Accept-Ranges).
      expect([res.headers.etag, res.headers['last-modified'], res.headers['accept-ranges']]).toEqual([undefined, undefined, undefined]);
    }
  });

  it('404 not_found for a file the build does not have; 400 for a name that is not a file name', async () => {
    for (const file of ['index-AAAAAAAA.js', 'secrets.txt', 'index.js']) {
      const res = await t.api.send('get', `${consolePath}/${file}`);
      expect([file, res.status, res.body.error?.code]).toEqual([file, 404, 'not_found']);
    }
    expect((await t.api.send('get', `${consolePath}/.env`)).status).toBe(400);
    expect((await t.api.send('get', `${consolePath}/%2e%2e%2fpackage.json`)).status).toBe(400);
    expect((await t.api.send('get', `${consolePath}?token=x`)).status).toBe(400);
  });
});

describe('the console page marks whether Cloudflare Access may sign the operator in (so that, signed out, it sends no request that must fail)', () => {
  let t: TestGateway;
  let plain: TestGateway;
  let jwks: Awaited<ReturnType<typeof startJwksServer>>;
  const marker = (page: string) => /<meta name="access-sign-in" content="(on|off)" \/>/.exec(page)?.[1];
  beforeAll(async () => {
    buildConsoleIfStale();
    jwks = await startJwksServer();
    const access = { CF_ACCESS_TEAM_DOMAIN: 'console-team.cloudflareaccess.com', CF_ACCESS_AUD: 'console-aud', CF_ACCESS_JWKS_URL: jwks.url };
    t = await startTestGateway({ ...access, CF_ACCESS_ADMIN_SCOPES: 'keys:read' });
    plain = await startTestGateway(access);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await plain?.close();
    await jwks?.close();
  });

  it('"on" only with CF_ACCESS_ADMIN_SCOPES set and an Access JWT on the request (no Authorization header), on the page and its routes', async () => {
    const jwt = { 'Cf-Access-Jwt-Assertion': 'header.payload.signature' };
    const cases: Array<[string, TestGateway, string, Record<string, string>, string]> = [
      ['scopes, JWT', t, consolePath, jwt, 'on'],
      ['scopes, JWT, a console route', t, `${consolePath}/keys`, jwt, 'on'],
      ['scopes, no JWT', t, consolePath, {}, 'off'],
      ['scopes, JWT and a token', t, consolePath, { ...jwt, Authorization: 'Bearer hyadm_x' }, 'off'],
      ['no scopes, JWT', plain, consolePath, jwt, 'off'],
    ];
    for (const [name, gateway, route, headers, expected] of cases) {
      const res = await gateway.api.send('get', route, { headers });
      expect([name, res.status, res.headers['content-security-policy'], res.headers['cache-control'], marker(res.text)]).toEqual([
        name,
        200,
        CONSOLE_CSP,
        'no-cache',
        expected,
      ]);
    }
  });
});

describe('a gateway whose console was not built', () => {
  it('answers 404 not_found saying how to build it, for the page and for its routes', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-console-'));
    const handlers = consoleHandlers(empty);
    const app = express();
    app.get('/console', handlers.getConsole.raw);
    app.get('/console/:file', handlers.getConsoleFile.raw);
    app.use(errorHandler({ error: () => undefined, warn: () => undefined } as never));
    for (const route of ['/console', '/console/keys']) {
      const res = await request(app).get(route);
      expect([route, res.status, res.body.error?.code, res.body.error?.message]).toEqual([
        route,
        404,
        'not_found',
        'The console is not built: run `npm run build`.',
      ]);
    }
    fs.rmSync(empty, { recursive: true });
  });
});
