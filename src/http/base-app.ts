import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics/metrics';
import { docsAssetsRouter } from './docs';
import { requestId } from './request-id';
import { requestLogger } from './request-logger';
import { requestMetrics } from './request-metrics';
import { securityHeaders } from './security-headers';

/**
 * What both listeners start with: strict, quiet Express settings, then request id, security
 * headers, the request log and metrics, and the Scalar bundle (a public static asset).
 */
export function createBaseApp(deps: { logger: Logger; metrics: GatewayMetrics }, listener: 'public' | 'internal'): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('case sensitive routing', true);
  app.use(requestId, securityHeaders, requestLogger(deps.logger), requestMetrics(deps.metrics, listener));
  app.use('/docs', docsAssetsRouter());
  return app;
}

/** JSON bodies only; anything else is left for the validator to refuse with 415. */
export function jsonBody(limitBytes: number) {
  return express.json({ limit: limitBytes, type: ['application/json', 'application/*+json'] });
}
