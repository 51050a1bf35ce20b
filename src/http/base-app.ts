import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics/metrics';
import { bodyDeadline } from './body-deadline';
import { docsAssetsRouter } from './docs';
import { requestContext } from './request-context';

/** BODY_TIMEOUT_MS's default, for apps built without it. */
const DEFAULT_BODY_TIMEOUT_MS = 10_000;

/**
 * What both listeners start with: strict, quiet Express settings, then the request context (id,
 * security headers, log line, metric), the body guard (before auth, so no client can hold a socket
 * with a body it never finishes), and the Scalar bundle (a public static asset).
 */
export function createBaseApp(
  deps: { logger: Logger; metrics: GatewayMetrics; bodyLimitBytes: number; bodyTimeoutMs?: number },
  listener: 'public' | 'internal',
): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('case sensitive routing', true);
  app.use(requestContext(deps, listener));
  app.use(bodyDeadline({ bodyLimitBytes: deps.bodyLimitBytes, bodyTimeoutMs: deps.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS }));
  app.use('/docs', docsAssetsRouter());
  return app;
}

/** JSON bodies only; anything else is left for the validator to refuse with 415. */
export function jsonBody(limitBytes: number) {
  return express.json({ limit: limitBytes, type: ['application/json', 'application/*+json'] });
}
