import type { Request, RequestHandler } from 'express';
import { ApiError } from '../errors/api-error';
import { sendError } from '../errors/error-handler';
import { hasBody } from './unread-body';

export interface BodyDeadlineOptions {
  bodyLimitBytes: number;
  /** A larger limit for some requests (operations that take image inputs), or undefined for bodyLimitBytes. */
  bodyLimitFor?: (req: Request) => number | undefined;
  /** How long a body may take to arrive after its headers (BODY_TIMEOUT_MS). */
  bodyTimeoutMs: number;
}

/**
 * Guards request bodies before anything else reads them: a declared Content-Length over the limit is
 * 413 at once (body-parser would first read the whole body, or wait for it until the request
 * timeout), and a body that has not fully arrived BODY_TIMEOUT_MS after its headers is 408 and its
 * connection closed, so slow-body clients cannot hold sockets (and file descriptors) for minutes.
 */
export function bodyDeadline(options: BodyDeadlineOptions): RequestHandler {
  return (req, res, next) => {
    if (!hasBody(req) || req.complete) return next();
    const declared = Number(req.headers['content-length']);
    const limit = options.bodyLimitFor?.(req) ?? options.bodyLimitBytes;
    if (declared > limit) {
      sendError(res, new ApiError('payload_too_large', `The request body is ${declared} bytes; the limit is ${limit}.`));
      return;
    }
    // The bound of what is read and dropped after an early refusal (unread-body.ts).
    res.locals.bodyLimitBytes = limit;
    const deadline = setTimeout(() => {
      if (req.complete) return;
      if (res.headersSent) {
        req.socket.destroy();
        return;
      }
      sendError(res, new ApiError('request_timeout', `The request body did not arrive within ${options.bodyTimeoutMs} ms.`));
    }, options.bodyTimeoutMs);
    const settle = () => clearTimeout(deadline);
    req.once('end', settle);
    req.once('close', settle);
    // An answer sent while the body still arrives (read and dropped, unread-body.ts) keeps the deadline.
    res.once('close', () => {
      if (req.complete || req.socket.destroyed) settle();
    });
    next();
  };
}
