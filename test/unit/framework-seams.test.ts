import fs from 'node:fs';
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express, { type ErrorRequestHandler, type RequestHandler, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import request from 'supertest';
import { jsonBody } from '../../src/http/base-app';
import type { OpenApiDocument } from '../../src/http/openapi-document';
import { LEFT_OUT_LAYERS, openApiValidator } from '../../src/http/openapi-validator';

/**
 * Canaries for docs/maintainers/framework-seams.md: each pins what one seam of ours relies on in a
 * library (or in Node), so an upgrade that changes it fails here, by the seam's number, rather than as a
 * puzzling failure elsewhere (or not at all). What to do when one fails is in the doc, under its number.
 */
const root = path.resolve(__dirname, '../..');
const seam = (n: number, what: string) => `seam ${n} (framework-seams.md): ${what}`;

/** A small document in the shape of ours: a GET with a date-time query parameter, a POST with a JSON body. */
const miniDocument = {
  openapi: '3.1.0',
  info: { title: 'seams', version: '1' },
  paths: {
    '/things': {
      get: {
        operationId: 'listThings',
        parameters: [{ name: 'since', in: 'query', allowReserved: true, schema: { type: 'string', format: 'date-time' } }],
        responses: { '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
      post: {
        operationId: 'makeThing',
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: { type: 'object', required: ['name'], properties: { name: { type: 'string' } }, additionalProperties: false } },
          },
        },
        responses: { '201': { description: 'made', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
  },
} as unknown as OpenApiDocument;

interface CapturedError {
  status?: number;
  type?: string;
  message?: string;
  errors?: Array<{ path?: string }>;
  headers?: Record<string, string>;
}

/** The error a layer passed on, as the error handler (src/errors/error-handler.ts) receives it; its status also in a header, for HEAD. */
const captureError: ErrorRequestHandler = (err: CapturedError, _req, res, _next) => {
  res.setHeader('X-Error-Status', String(err.status));
  res
    .status(299)
    .json({ message: err.message, status: err.status, type: err.type, path: err.errors?.[0]?.path, allow: err.headers?.Allow ?? err.headers?.allow });
};

/** The library's layers as the gateway installs them, without the gateway's own wording of their refusals: the seams are the library's shapes. */
function libraryLayers(document: Parameters<typeof openApiValidator>[0]) {
  return openApiValidator(document, false).filter((layer) => layer.name !== 'readableRefusals');
}

describe(seam(1, 'the patch to express-openapi-validator is written for the installed version and applied'), () => {
  const patches = fs.readdirSync(path.join(root, 'patches')).filter((name) => name.endsWith('.patch'));

  it('patches/ holds the one patch the doc lists', () => {
    expect(patches).toEqual(['express-openapi-validator+5.6.2.patch']);
  });

  it.each(patches)('%s: the installed package is the version the patch names', (file) => {
    const [, name, version] = /^(.+)\+([^+]+)\.patch$/.exec(file) ?? [];
    const installed = (JSON.parse(fs.readFileSync(path.join(root, 'node_modules', name as string, 'package.json'), 'utf8')) as { version: string }).version;
    expect({ patch: file, installed }).toEqual({ patch: file, installed: version });
  });

  it.each(patches)('%s: every line it adds is in the installed files (patch-package ran on install)', (file) => {
    const sections = fs
      .readFileSync(path.join(root, 'patches', file), 'utf8')
      .split(/^diff --git /m)
      .slice(1);
    expect(sections.length).toBeGreaterThan(0);
    for (const section of sections) {
      const target = /^\+\+\+ b\/(.+)$/m.exec(section)?.[1];
      expect(target).toBeDefined();
      const installed = fs.readFileSync(path.join(root, target as string), 'utf8');
      const added = section
        .split('\n')
        .filter((line) => line.startsWith('+') && !line.startsWith('+++'))
        .map((line) => line.slice(1).trim())
        .filter((line) => line.length > 0);
      expect(added.length).toBeGreaterThan(0);
      expect({ target, missing: added.filter((line) => !installed.includes(line)) }).toEqual({ target, missing: [] });
    }
  });
});

describe(seam(2, 'the validator layers are left out by function name'), () => {
  const namesOf = (layers: RequestHandler[]) => layers.map((layer) => layer.name);

  it('the library still names its layers as the filter expects, and has no layer the filter has not judged', () => {
    const all = OpenApiValidator.middleware({
      apiSpec: structuredClone(miniDocument) as never,
      validateRequests: true,
      validateResponses: true,
      validateSecurity: false,
      fileUploader: false,
    }) as unknown as RequestHandler[];
    expect(namesOf(all)).toEqual(['pathParamsMiddleware', 'metadataMiddleware', 'securityMiddleware', 'requestMiddleware', 'responseMiddleware']);
  });

  it('what the gateway installs: metadata, request and response validation, nothing left out', () => {
    expect([...LEFT_OUT_LAYERS].sort()).toEqual(['pathParamsMiddleware', 'securityMiddleware']);
    // readableRefusals is the gateway's own last layer: it words the library's 400s (test/http/validator-wording.test.ts).
    expect(namesOf(openApiValidator(miniDocument, true))).toEqual(['metadataMiddleware', 'requestMiddleware', 'responseMiddleware', 'readableRefusals']);
    expect(namesOf(openApiValidator(miniDocument, false))).toEqual(['metadataMiddleware', 'requestMiddleware', 'readableRefusals']);
  });
});

describe(seam(3, 'req.query is redefined on the request'), () => {
  it('Express 5 gives req.query as a getter without a setter, which an own property may shadow', () => {
    const descriptor = Object.getOwnPropertyDescriptor(express.request, 'query');
    expect({ get: typeof descriptor?.get, set: descriptor?.set, configurable: descriptor?.configurable }).toEqual({
      get: 'function',
      set: undefined,
      configurable: true,
    });
  });

  it('the validator checks the own req.query a layer defined (a date-time whose + arrived as a space, restored)', async () => {
    const restore: RequestHandler = (req, _res, next) => {
      const query = req.query as Record<string, string>;
      if (query.since)
        Object.defineProperty(req, 'query', {
          value: { ...query, since: query.since.replace(' ', '+') },
          writable: true,
          configurable: true,
          enumerable: true,
        });
      next();
    };
    const app = express()
      .use(restore, ...libraryLayers(miniDocument))
      .get('/things', (req, res) => res.json({ since: (req.query as Record<string, string>).since }))
      .use(captureError);
    const shown = await request(app).get('/things?since=2030-01-01T01:00:00+01:00');
    expect([shown.status, shown.body]).toEqual([200, { since: '2030-01-01T01:00:00+01:00' }]);
    // Without the layer the validator sees the space and refuses: the redefinition is what it reads.
    const bare = express()
      .use(...libraryLayers(miniDocument))
      .get('/things', (_req, res) => res.json({}))
      .use(captureError);
    expect((await request(bare).get('/things?since=2030-01-01T01:00:00+01:00')).body).toMatchObject({ status: 400, path: '/query/since' });
  });
});

describe(seam(4, 'HEAD is served by showing the validator GET'), () => {
  it("Express's router answers HEAD with a GET route, req.method still HEAD, and sends no body", async () => {
    const app = express().get('/things', (req, res) => res.json({ method: req.method }));
    const res = await request(app).head('/things');
    expect([res.status, res.headers['content-type'], res.text ?? '']).toEqual([200, 'application/json; charset=utf-8', '']);
  });

  it('the validator refuses HEAD on a path documented only for GET (upstream issue #874): the rewrite is still needed', async () => {
    const app = express()
      .use(...libraryLayers(miniDocument))
      .get('/things', (_req, res) => res.json({}))
      .use(captureError);
    expect((await request(app).head('/things')).headers['x-error-status']).toBe('405');
    // Shown as GET (what spec-router.ts does), the validator passes it on to the route.
    const showAsGet: RequestHandler = (req, _res, next) => {
      if (req.method === 'HEAD') req.method = 'GET';
      next();
    };
    const shown = express()
      .use(showAsGet, ...libraryLayers(miniDocument))
      .get('/things', (_req, res) => res.json({}))
      .use(captureError);
    const res = await request(shown).head('/things');
    expect([res.status, res.headers['x-error-status']]).toEqual([200, undefined]);
  });
});

describe(seam(5, 'res.end is replaced per response (rate-limit headers)'), () => {
  /** The shape of rate-limit-headers.middleware.ts: an own `end` that sets a header, at once or after a wait. */
  const replaceEnd =
    (deferred: boolean): RequestHandler =>
    (_req, res, next) => {
      const end = res.end;
      res.end = function (this: Response, ...args: unknown[]) {
        if (!deferred) {
          this.setHeader('X-Seam', 'set in end');
          return (end as (...a: unknown[]) => Response).apply(this, args);
        }
        void Promise.resolve().then(() => {
          this.setHeader('X-Seam', 'set after a wait');
          (end as (...a: unknown[]) => Response).apply(this, args);
        });
        return this;
      } as Response['end'];
      next();
    };
  const ends: Record<string, RequestHandler> = {
    json: (_req, res) => void res.status(201).json({ a: 1 }),
    send: (_req, res) => void res.type('text/plain').send('text'),
    buffer: (_req, res) => void res.type('image/png').send(Buffer.from([1, 2, 3])),
    empty: (_req, res) => void res.status(204).end(),
    status: (_req, res) => void res.sendStatus(202),
    error: () => {
      throw Object.assign(new Error('refused'), { status: 400 });
    },
  };

  it.each([false, true])('every way a response ends goes through the replaced end (deferred: %s)', async (deferred) => {
    const app = express().use(replaceEnd(deferred));
    for (const [name, handler] of Object.entries(ends)) app.get(`/${name}`, handler);
    app.use(((_err, _req, res, _next) => void res.status(400).json({ error: 'x' })) as ErrorRequestHandler);
    for (const name of Object.keys(ends)) {
      const res = await request(app).get(`/${name}`);
      expect({ name, header: res.headers['x-seam'] }).toEqual({ name, header: deferred ? 'set after a wait' : 'set in end' });
    }
  });
});

describe(seam(6, 'a body read by the image-inputs layer is not read again by the JSON parser'), () => {
  it('body-parser skips a request whose body was already read, whatever its own limit', async () => {
    const app = express()
      .use(jsonBody(1024 * 1024), jsonBody(8))
      .post('/things', (req, res) => res.json(req.body))
      .use(captureError);
    const res = await request(app).post('/things').send({ name: 'longer than eight bytes' });
    expect([res.status, res.body]).toEqual([200, { name: 'longer than eight bytes' }]);
  });
});

describe(seam(7, "Express passes a rejected handler's error to the error handler"), () => {
  it('an async guard or handler that throws reaches the error layers', async () => {
    const app = express()
      .get('/things', async () => {
        await Promise.resolve();
        throw Object.assign(new Error('no'), { status: 401, type: 'guard' });
      })
      .use(captureError);
    expect((await request(app).get('/things')).body).toMatchObject({ status: 401, type: 'guard' });
  });
});

describe(seam(8, 'the error handler reads the errors of body-parser and the validator by their shape'), () => {
  const parsing = () =>
    express()
      .use(jsonBody(64))
      .post('/things', (_req, res) => res.json({}))
      .use(captureError);

  it.each([
    ['not JSON', { 'Content-Type': 'application/json' }, '{"a', { status: 400, type: 'entity.parse.failed' }],
    ['over the limit', { 'Content-Type': 'application/json' }, JSON.stringify({ name: 'x'.repeat(100) }), { status: 413, type: 'entity.too.large' }],
    ['a charset other than UTF-8', { 'Content-Type': 'application/json; charset=latin1' }, '{}', { status: 415, type: 'charset.unsupported' }],
    [
      'an unknown Content-Encoding',
      { 'Content-Type': 'application/json', 'Content-Encoding': 'x-unknown' },
      '{}',
      { status: 415, type: 'encoding.unsupported' },
    ],
  ])('body-parser: %s', async (_what, headers, body, expected) => {
    expect((await request(parsing()).post('/things').set(headers).send(body)).body).toMatchObject(expected);
  });

  it('the validator: status, errors[0].path, and Allow on a 405', async () => {
    const app = express()
      .use(express.json(), ...libraryLayers(miniDocument))
      .post('/things', (_req, res) => res.status(201).json({}))
      .use(captureError);
    expect((await request(app).post('/things').send({ name: 1 })).body).toMatchObject({ status: 400, path: '/body/name' });
    expect((await request(app).post('/things').set('Content-Type', 'text/plain').send('x')).body).toMatchObject({ status: 415 });
    expect((await request(app).delete('/things')).body).toMatchObject({ status: 405, allow: 'POST, GET' });
    expect((await request(app).get('/nothing')).body).toMatchObject({ status: 404 });
  });
});

describe(seam(9, "Node's socket._httpMessage is the response being written on a connection"), () => {
  it('a request handler finds its own response there (client-errors.ts answers a broken body on it)', async () => {
    let same: boolean | undefined;
    const server = http.createServer((req, res) => {
      same = (req.socket as typeof req.socket & { _httpMessage?: ServerResponse | null })._httpMessage === res;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await request(`http://127.0.0.1:${(server.address() as AddressInfo).port}`).get('/');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    expect(same).toBe(true);
  });
});

describe('framework-seams.md and this file agree', () => {
  it('every seam a canary here names is a row of the table, under the same number', () => {
    const doc = fs.readFileSync(path.join(root, 'docs/maintainers/framework-seams.md'), 'utf8');
    const rows = new Set([...doc.matchAll(/^\| (\d+) \|/gm)].map((match) => Number(match[1])));
    const here = fs.readFileSync(__filename, 'utf8');
    const named = [...here.matchAll(/describe\(seam\((\d+),/g)].map((match) => Number(match[1]));
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((n) => !rows.has(n))).toEqual([]);
    expect([...rows]).toEqual(Array.from({ length: rows.size }, (_, i) => i + 1));
  });
});
