import fs from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import type { Express } from 'express';
import type { OpenApiDocument } from '../../src/http/openapi-document';
import { operationsOf } from '../../src/http/spec-router';
import type { ApiName, OperationRecord } from './operation-coverage';

/** Set by the integration tiers' global setup (global-setup-operation-records.js); unset, nothing is recorded. */
export const OPERATION_RECORDS_DIR = 'OPERATION_RECORDS_DIR';

/** Each (api, operationId, status) once per test file: the check needs presence, not counts. */
const written = new Set<string>();

function write(record: OperationRecord): void {
  const dir = process.env[OPERATION_RECORDS_DIR];
  const key = `${record.api} ${record.operationId} ${record.status}`;
  if (!dir || written.has(key)) return;
  written.add(key);
  fs.appendFileSync(path.join(dir, `${process.pid}.jsonl`), `${JSON.stringify(record)}\n`);
}

/**
 * Records which operation answered each request an app serves, and with which status, for
 * scripts/check-operation-coverage.mjs. The operation is found as the spec router finds it: the
 * first one, in document order, with the request's method and a path template the path matches
 * (one trailing slash allowed). HEAD is recorded as nothing: it proves no GET response.
 *
 * It wraps `app.handle`, which Express's app function calls for every request (express/lib/express.js).
 * Should an Express upgrade stop calling it, nothing is recorded and the check fails on every operation.
 */
export function recordOperations(app: Express, api: ApiName, document: OpenApiDocument): void {
  if (!process.env[OPERATION_RECORDS_DIR]) return;
  const routes = operationsOf(document).map((operation) => ({
    operationId: operation.operationId,
    method: operation.method.toUpperCase(),
    pattern: new RegExp(`^${operation.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
  }));
  const appWithHandle = app as unknown as { handle: (req: IncomingMessage, res: ServerResponse, next?: unknown) => void };
  const handle = appWithHandle.handle.bind(app);
  appWithHandle.handle = (req, res, next) => {
    // Read before routing: Express rewrites `req.url` and HEAD is shown to the validator as GET.
    const urlPath = (req.url ?? '').split('?')[0]!;
    const route = routes.find((r) => r.method === req.method && r.pattern.test(urlPath));
    if (route) res.once('finish', () => write({ api, operationId: route.operationId, status: res.statusCode }));
    handle(req, res, next);
  };
}
