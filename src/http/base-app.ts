import express, { type Express, type Request, type RequestHandler } from 'express';
import { ApiError } from '../errors/api-error';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics/metrics';
import { bodyDeadline } from './body-deadline';
import { STATIC_ASSETS_PREFIX, staticAssetsRouter } from './docs';
import { requestContext } from './request-context';

/**
 * What both listeners start with: strict, quiet Express settings, then the request context (id,
 * security headers, log line, metric), the body guard (before auth, so no client can hold a socket
 * with a body it never finishes), and the Scalar bundle (a public static asset).
 */
export function createBaseApp(
  deps: {
    logger: Logger;
    metrics: GatewayMetrics;
    /** LOG_REQUESTS (default true). */
    logRequests?: boolean;
    bodyLimitBytes: number;
    bodyTimeoutMs: number;
    bodyLimitFor?: (req: Request) => number | undefined;
  },
  listener: 'public' | 'internal',
): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('case sensitive routing', true);
  app.use(requestContext(deps, listener));
  app.use(
    bodyDeadline({ bodyLimitBytes: deps.bodyLimitBytes, bodyTimeoutMs: deps.bodyTimeoutMs, ...(deps.bodyLimitFor ? { bodyLimitFor: deps.bodyLimitFor } : {}) }),
  );
  app.use(STATIC_ASSETS_PREFIX, staticAssetsRouter());
  return app;
}

/** Deepest nesting of arrays and objects a JSON body may have; ours need 2, OpenAI clients a few more. */
export const MAX_JSON_DEPTH = 32;

/**
 * Refuses a body nested deeper than MAX_JSON_DEPTH by scanning its bytes before it is parsed, so
 * no later layer (validator, idempotency hashing, handlers) ever walks an unbounded tree.
 */
function checkJsonDepth(raw: Buffer): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i];
    if (inString) {
      if (byte === 0x5c)
        i++; // backslash: skip the escaped character
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x5b || byte === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) throw new ApiError('invalid_request', `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`);
    } else if (byte === 0x5d || byte === 0x7d) depth--;
  }
}

/**
 * The first string (value or member name) holding a NUL character, as a path (`images[1]`, `extra.note`) ('' for `value`
 * itself), or undefined. Every JSON body is walked: the path is built only on the way back from a find.
 */
export function pathOfNul(value: unknown): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? '' : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const name of Object.keys(value)) {
    if (name.includes('\u0000')) return name;
    const found = pathOfNul((value as Record<string, unknown>)[name]);
    if (found === undefined) continue;
    // Spelled as the validator's `param` (openapi-validator.ts paramName): `images[1]`, `metadata.team`.
    const step = Array.isArray(value) ? `[${name}]` : name;
    return found === '' ? step : found.startsWith('[') ? `${step}${found}` : `${step}.${found}`;
  }
  return undefined;
}

/** NUL is refused in every string the gateway stores or forwards: PostgreSQL text cannot hold it. */
export function refuseNul(value: unknown, param: string | null): void {
  const found = pathOfNul(value);
  if (found !== undefined) {
    const name = found || param;
    throw new ApiError('invalid_request', `${name ? `${name}: ` : ''}must not contain the NUL character (U+0000).`, { param: name });
  }
}

/**
 * JSON bodies only (anything else is left for the validator to refuse with 415): nesting bounded
 * before parsing, NUL characters refused after it, both 400 `invalid_request`.
 */
export function jsonBody(limitBytes: number): RequestHandler {
  const parse = express.json({
    limit: limitBytes,
    type: ['application/json', 'application/*+json'],
    verify: (_req, _res, raw) => checkJsonDepth(raw),
  });
  return (req, res, next) => {
    parse(req, res, (error?: unknown) => {
      if (error) {
        next(error);
        return;
      }
      try {
        refuseNul(req.body, null);
      } catch (refusal) {
        next(refusal);
        return;
      }
      next();
    });
  };
}
