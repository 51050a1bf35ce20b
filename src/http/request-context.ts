import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics/metrics';
import { traceRequest } from '../telemetry/http-spans';
import { assignRequestId } from './request-id';
import { logRequest } from './request-logger';
import { countRequest } from './request-metrics';
import { setSecurityHeaders } from './security-headers';

/**
 * What every request gets before anything else: an id, the security headers, and, once the
 * response is finished, one log line and one metric. One middleware and one listener rather than
 * four of each: Express and Node pay per layer and per listener on every request.
 */
export function requestContext(deps: { logger: Logger; metrics: GatewayMetrics; logRequests?: boolean }, listener: 'public' | 'internal'): RequestHandler {
  const logged = deps.logRequests ?? true;
  return (req, res, next) => {
    const startedNs = process.hrtime.bigint();
    assignRequestId(req, res);
    setSecurityHeaders(res);
    res.on('finish', () => {
      if (logged) logRequest(deps.logger, req, res, startedNs);
      countRequest(deps.metrics, listener, req, res);
    });
    // With tracing, the rest of the request runs inside its server span (next called there).
    if (!traceRequest(req, res, next)) next();
  };
}
