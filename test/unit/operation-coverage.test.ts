import type { OpenApiDocument } from '../../src/http/openapi-document';
import { type CoverageExceptions, coverageReport, documentedOperations, type OperationRecord } from '../helpers/operation-coverage';

const error = (name: string) => ({ $ref: `#/components/responses/${name}` });

/** Two operations: a secured one with a shared 500 and its own 404, and an open one. */
const document = {
  openapi: '3.1.0',
  security: [{ ApiKey: [] }],
  paths: {
    '/things/{id}': {
      get: {
        operationId: 'getThing',
        responses: {
          200: { description: 'ok' },
          304: { description: 'same' },
          401: error('Unauthorized'),
          404: error('ThingNotFound'),
          500: error('InternalError'),
        },
      },
    },
    '/healthz': { get: { operationId: 'getLiveness', security: [], responses: { 200: { description: 'ok' }, 500: error('InternalError') } } },
  },
} as unknown as OpenApiDocument;

const operations = documentedOperations('gateway', document);
const answered = (operationId: string, ...statuses: number[]): OperationRecord[] => statuses.map((status) => ({ api: 'gateway', operationId, status }));
const none: CoverageExceptions = { sharedResponses: {}, operations: {} };

describe('operation coverage: documented responses against what the tests were answered', () => {
  it('reads successes, errors with their components, and security from the document', () => {
    expect(operations).toEqual([
      {
        api: 'gateway',
        operationId: 'getThing',
        secured: true,
        successes: [200],
        errors: [
          { status: 401, component: 'Unauthorized' },
          { status: 404, component: 'ThingNotFound' },
          { status: 500, component: 'InternalError' },
        ],
      },
      { api: 'gateway', operationId: 'getLiveness', secured: false, successes: [200], errors: [{ status: 500, component: 'InternalError' }] },
    ]);
  });

  it('an operation no test reached misses its success, each error and its auth test', () => {
    expect(coverageReport(operations, [], none).gaps).toEqual([
      { api: 'gateway', operationId: 'getThing', missing: ['success', 404, 500, 'auth'] },
      { api: 'gateway', operationId: 'getLiveness', missing: ['success', 500] },
    ]);
  });

  it('answers count for the operation that gave them only, and a 3xx is no success', () => {
    const records = [...answered('getThing', 304, 404), ...answered('getLiveness', 200, 401, 500)];
    expect(coverageReport(operations, records, none).gaps).toEqual([{ api: 'gateway', operationId: 'getThing', missing: ['success', 500, 'auth'] }]);
  });

  it('a shared response is required of some operation, not of each', () => {
    const exceptions = { sharedResponses: { InternalError: 'one error handler' }, operations: {} };
    const unanswered = coverageReport(operations, [...answered('getThing', 200, 401, 404), ...answered('getLiveness', 200)], exceptions);
    expect(unanswered).toEqual({ gaps: [], excused: [], sharedUnanswered: ['InternalError'], staleExceptions: [] });
    const once = coverageReport(operations, [...answered('getThing', 200, 401, 404), ...answered('getLiveness', 200, 500)], exceptions);
    expect(once).toEqual({ gaps: [], excused: [], sharedUnanswered: [], staleExceptions: [] });
  });

  it('an exception excuses its one requirement, and one that excuses nothing is stale', () => {
    const exceptions = {
      sharedResponses: { NeverDocumented: 'no operation refers to it' },
      operations: { 'gateway getThing 500': 'no fault to inject', 'gateway getLiveness success': 'answered 200 below' },
    };
    const records = [...answered('getThing', 200, 401), ...answered('getLiveness', 200, 500)];
    expect(coverageReport(operations, records, exceptions)).toEqual({
      gaps: [{ api: 'gateway', operationId: 'getThing', missing: [404] }],
      excused: ['gateway getThing 500'],
      sharedUnanswered: [],
      staleExceptions: ['gateway getLiveness success', 'NeverDocumented'],
    });
  });
});
