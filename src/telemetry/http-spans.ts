import type { Request, Response } from 'express';
import { creativeOperations } from '../../generated/creative.operations';
import { gatewayOperations } from '../../generated/gateway.operations';
import { startServerSpan, tracingEnabled } from './tracing';

/** `${method} ${spec path}` -> operationId, over both APIs; built on the first traced request. */
let operationIds: Map<string, string> | undefined;

function operationIdOf(method: string, path: string): string | undefined {
  operationIds ??= new Map(
    [...Object.entries(gatewayOperations), ...Object.entries(creativeOperations)].map(([id, op]) => [`${op.method.toUpperCase()} ${op.path}`, id]),
  );
  return operationIds.get(`${method} ${path}`);
}

/**
 * The server span of one request (HTTP semantic conventions): started before anything else runs,
 * named and ended when the response closes, with the spec's path as `http.route` and the
 * operationId. Returns false without tracing: the caller calls `next` itself.
 */
export function traceRequest(req: Request, res: Response, next: () => void): boolean {
  if (!tracingEnabled()) return false;
  // The listener's own address, not the Host header: no header value goes into a span.
  const local = req.socket.localAddress;
  const span = startServerSpan(
    req,
    res,
    {
      'http.request.method': req.method,
      'url.scheme': 'http',
      ...(local !== undefined ? { 'server.address': local.replace(/^::ffff:/, '') } : {}),
      ...(req.socket.localPort !== undefined ? { 'server.port': req.socket.localPort } : {}),
    },
    next,
  );
  if (!span) return false;
  res.once('close', () => {
    // Express's route path, its `:name` parameters written as the spec writes them (`{name}`).
    const routePath = (req.route as { path?: unknown } | undefined)?.path;
    const route = typeof routePath === 'string' ? `${req.baseUrl}${routePath}`.replace(/:([A-Za-z0-9_]+)/g, '{$1}') : undefined;
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const operationId = route === undefined ? undefined : operationIdOf(method, route);
    span.set({
      'http.response.status_code': res.statusCode,
      'gateway.request_id': res.locals.requestId,
      ...(res.locals.principal?.kind === 'client' ? { 'gateway.key.id': res.locals.principal.key.id } : {}),
      ...(route !== undefined ? { 'http.route': route } : {}),
      ...(operationId !== undefined ? { 'gateway.operation_id': operationId } : {}),
    });
    if (route !== undefined) span.rename(`${req.method} ${route}`);
    if (res.statusCode >= 500) span.fail(String(res.statusCode));
    span.end();
  });
  return true;
}
