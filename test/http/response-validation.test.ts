import express, { type ErrorRequestHandler } from 'express';
import request from 'supertest';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { openApiValidator } from '../../src/http/openapi-validator';

/**
 * The validator layer with responses checked, as every test run mounts it, on the real document: a
 * handler answering off-contract gets 500 from the validator, one answering to contract passes. The
 * response schemas are compiled without the surrounding document when they hold no `$ref`
 * (patches/express-openapi-validator+*.patch); this shows that still rejects nested mistakes.
 */
describe('response validation (express-openapi-validator, validateResponses on)', () => {
  function appAnswering(path: string, body: unknown): express.Express {
    const app = express();
    app.use(express.json());
    app.use(openApiValidator(loadOpenApiDocument('gateway'), true));
    app.get(path, (_req, res) => {
      res.json(body);
    });
    const report: ErrorRequestHandler = (err: { status?: number; message?: string }, _req, res, _next) => {
      res.status(err.status ?? 500).json({ message: err.message });
    };
    app.use(report);
    return app;
  }

  it('passes a body that matches the operation’s response', async () => {
    const res = await request(appAnswering('/healthz', { status: 'ok' })).get('/healthz');
    expect([res.status, res.body]).toEqual([200, { status: 'ok' }]);
  });

  it('answers 500 for a top-level field of the wrong type', async () => {
    const res = await request(appAnswering('/healthz', { status: 42 })).get('/healthz');
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/status/);
  });

  it('answers 500 for a mistake deep inside a referenced schema (a model without its id)', async () => {
    const res = await request(appAnswering('/v1/models', { object: 'list', data: [{ object: 'model', created: 0, owned_by: 'x' }] })).get('/v1/models');
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/id/);
  });
});
