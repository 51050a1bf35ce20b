import express, { type RequestHandler } from 'express';
import request from 'supertest';
import type { OpenApiDocument } from '../../src/http/openapi-document';
import { type LayerRow, specRouter } from '../../src/http/spec-router';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';

/**
 * The declared layers of an operation run in the order of the layers table (src/app.ts), whatever the
 * order of the `x-` keys in the YAML: reordering the spec must not let a body be read before the
 * rate-limit layer is installed.
 */

type DocumentModule = typeof import('../../src/http/openapi-document');
/** The loader the gateway uses, and a switch: when on, the documents it loads list each operation's `x-` keys backwards. */
type MockedDocumentModule = DocumentModule & { mockReversed: { on: boolean } };

jest.mock('../../src/http/openapi-document', () => {
  const actual = jest.requireActual<DocumentModule>('../../src/http/openapi-document');
  const mockReversed = { on: false };
  return {
    ...actual,
    mockReversed,
    loadOpenApiDocument: (...args: Parameters<DocumentModule['loadOpenApiDocument']>) => {
      const document = actual.loadOpenApiDocument(...args);
      return mockReversed.on ? withReversedExtensions(document) : document;
    },
  };
});
const documents = jest.requireMock<MockedDocumentModule>('../../src/http/openapi-document');

/** The document with each operation's `x-` keys listed first and in reverse order, the rest as it was. */
function withReversedExtensions(document: OpenApiDocument): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const [template, item] of Object.entries(document.paths)) {
    paths[template] = Object.fromEntries(
      Object.entries(item).map(([method, operation]) => {
        if (!operation || typeof operation !== 'object' || Array.isArray(operation)) return [method, operation];
        const entries = Object.entries(operation as Record<string, unknown>);
        const extensions = entries.filter(([key]) => key.startsWith('x-')).reverse();
        return [method, Object.fromEntries([...extensions, ...entries.filter(([key]) => !key.startsWith('x-'))])];
      }),
    );
  }
  return { ...document, paths };
}

describe('layer order: the table, not the YAML', () => {
  /** A router for one operation declaring `extensions` (in that order), its every layer recording its name. */
  function tracedApp(extensions: string[]) {
    const document = {
      openapi: '3.1.0',
      paths: {
        '/thing': {
          post: {
            operationId: 'makeThing',
            ...Object.fromEntries(extensions.map((name) => [name, true])),
            requestBody: { content: { 'application/json': {} } },
          },
        },
      },
    } as unknown as OpenApiDocument;
    const step =
      (name: string): RequestHandler =>
      (_req, res, next) => {
        (res.locals.trace ??= []).push(name);
        next();
      };
    const table: LayerRow[] = [
      { extension: 'x-first', stage: 'before-validation', handler: step('x-first') },
      { extension: 'x-second', stage: 'before-validation', handler: step('x-second') },
      { extension: 'x-after', stage: 'after-validation', handler: step('x-after') },
    ];
    const { router } = specRouter({
      document,
      handlers: { makeThing: { raw: ((_req, res) => res.json([...res.locals.trace, 'handler'])) as RequestHandler } },
      guards: {},
      layers: table,
      bodyParser: step('body'),
      validator: [step('validator')],
    });
    return express().use(router);
  }

  it.each([[['x-first', 'x-second', 'x-after']], [['x-after', 'x-second', 'x-first']], [['x-second', 'x-after', 'x-first']]])(
    'an operation listing %j runs the table order',
    async (extensions) => {
      const res = await request(tracedApp(extensions)).post('/thing').send({});
      expect(res.body).toEqual(['x-first', 'x-second', 'body', 'validator', 'x-after', 'handler']);
    },
  );

  it('an operation declaring a subset runs that subset in the table order', async () => {
    const res = await request(tracedApp(['x-after', 'x-second']))
      .post('/thing')
      .send({});
    expect(res.body).toEqual(['x-second', 'body', 'validator', 'x-after', 'handler']);
  });

  it('an extension no layer implements, or a table listing one twice, stops startup', () => {
    expect(() => tracedApp(['x-unknown'])).toThrow('makeThing: no layer implements x-unknown');
    const layer = { extension: 'x-first', stage: 'before-validation', handler: (_q, _s, next) => next() } satisfies LayerRow;
    expect(() =>
      specRouter({ document: { paths: {} } as OpenApiDocument, handlers: {}, guards: {}, layers: [layer, layer], bodyParser: layer.handler, validator: [] }),
    ).toThrow('the layers table lists x-first more than once');
  });

  describe.each([
    ['as written', false],
    ['with every operation listing its x- keys backwards', true],
  ])('the gateway, its spec %s', (_how, reversed) => {
    let t: TestGateway;
    beforeAll(async () => {
      documents.mockReversed.on = reversed;
      t = await startTestGateway();
    });
    afterAll(async () => {
      documents.mockReversed.on = false;
      await t.close();
    });

    it('the loaded document lists editImageOpenAI x-rate-limited before x-image-inputs, or after when reversed', () => {
      const keys = Object.keys(documents.loadOpenApiDocument('gateway').paths['/v1/images/edits']?.post as object).filter((key) => key.startsWith('x-'));
      const listed = keys.indexOf('x-rate-limited') < keys.indexOf('x-image-inputs');
      expect(listed).toBe(!reversed);
    });

    it('a 16 MiB upload refused while it streams (413) still carries the rate-limit headers: the rate-limit layer ran before the body was read', async () => {
      const { key } = await t.createKey();
      const huge = Buffer.concat([testPng(8, 8), Buffer.alloc(16 * 1024 * 1024)]);
      const res = await request(t.gateway.url)
        .post('/v1/images/edits')
        .set('Authorization', `Bearer ${key}`)
        .field('prompt', 'x')
        .field('model', 'local-1')
        .attach('image', huge, 'huge.png');
      expect([res.status, res.body.error.code]).toEqual([413, 'image_input_too_large']);
      expect(res.headers['ratelimit-policy']).toBe('"rpm";q=1000;w=60');
      expect(res.headers['x-ratelimit-remaining']).toBe('1000');
    });
  });
});
