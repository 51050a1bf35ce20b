import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics/metrics';
import { STATIC_ASSETS_PREFIX, staticAssetsRouter } from './docs';
import { requestContext } from './request-context';

/**
 * What both listeners start with: strict, quiet Express settings, then the request context (id,
 * security headers, log line, metric), and the Scalar bundle (a public static asset).
 */
export function createBaseApp(deps: { logger: Logger; metrics: GatewayMetrics }, listener: 'public' | 'internal'): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('case sensitive routing', true);
  app.use(requestContext(deps, listener));
  app.use(STATIC_ASSETS_PREFIX, staticAssetsRouter());
  return app;
}

/** JSON bodies only; anything else is left for the validator to refuse with 415. */
export function jsonBody(limitBytes: number) {
  return express.json({ limit: limitBytes, type: ['application/json', 'application/*+json'] });
}
