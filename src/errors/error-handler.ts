import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { ApiError } from './api-error';
import { dependencyApiError } from './dependency-errors';
import { ERROR_CODES, type ErrorCode } from './error-codes';
import { ClientDisconnected } from '../http/abort-on-disconnect';
import { settleUnreadBody } from '../http/unread-body';

/** The shape express-openapi-validator and body-parser give their errors. */
interface FrameworkError {
  status?: number;
  headers?: Record<string, string>;
  type?: string;
  message?: string;
  errors?: Array<{ path?: string; message?: string }>;
}

/** `/body/prompt`, `.body.prompt`, `/query/limit` -> `prompt`, `limit`. */
function paramOf(path: string | undefined): string | null {
  if (!path) return null;
  const parts = path.split(/[./]/).filter(Boolean);
  const field = ['body', 'query', 'params', 'path', 'headers'].includes(parts[0] ?? '') ? parts.slice(1) : parts;
  return field.length > 0 ? field.join('.') : null;
}

/** Turns whatever was thrown into an ApiError; null means "unexpected", logged and sent as 500. */
function toApiError(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  // Logged where it happened (DependencyHealth), once a second, with the driver's own error.
  const dependencyError = dependencyApiError(err);
  if (dependencyError) return dependencyError;
  const e = err as FrameworkError;
  if (e?.type === 'entity.too.large') return new ApiError('payload_too_large', 'The request body is too large.');
  if (e?.type === 'entity.parse.failed') return new ApiError('invalid_request', 'The request body is not valid JSON.');
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
    return new ApiError('unsupported_media_type', 'Send the body as UTF-8 application/json.');
  }
  const byStatus: Partial<Record<number, ErrorCode>> = {
    400: 'invalid_request',
    404: 'not_found',
    405: 'method_not_allowed',
    413: 'payload_too_large',
    415: 'unsupported_media_type',
  };
  const code = e?.status === undefined ? undefined : byStatus[e.status];
  if (!code) return null;
  const first = e.errors?.[0];
  if (code === 'invalid_request') {
    const param = paramOf(first?.path);
    const detail = first?.message ?? e.message ?? 'invalid request';
    return new ApiError(code, param ? `${param}: ${detail}` : detail, { param });
  }
  if (code === 'not_found') return new ApiError(code, 'No such route. See /docs for the API reference.');
  if (code === 'method_not_allowed') {
    const allow = e.headers?.Allow ?? e.headers?.allow;
    return new ApiError(code, 'This route does not accept that method.', { headers: allow ? { Allow: allow } : {} });
  }
  if (code === 'unsupported_media_type') return new ApiError(code, 'Send the body as application/json.');
  return new ApiError(code, 'The request body is too large.');
}

/** The one error envelope, as every error answer carries it. */
export function errorEnvelope(error: ApiError, requestId: string) {
  return {
    error: {
      code: error.code,
      message: error.message,
      type: ERROR_CODES[error.code].type,
      param: error.param,
      request_id: requestId,
      ...error.details,
    },
  };
}

export function sendError(res: Response, error: ApiError): void {
  settleUnreadBody(res, error.code === 'payload_too_large' || error.code === 'request_timeout');
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.status(error.status).json(errorEnvelope(error, res.locals.requestId));
}

/** The one place errors become responses: always the envelope, never a stack trace. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (err instanceof ClientDisconnected) {
      // An ordinary client action, not a fault: there is nobody left to answer.
      const generation = err.generation ? { generation_id: err.generation.generationId, charged_credits: err.generation.chargedCredits } : {};
      logger.info({ request_id: res.locals.requestId, method: req.method, path: req.path, ...generation }, 'client disconnected before the answer');
      return;
    }
    let apiError = toApiError(err);
    if (!apiError) {
      logger.error({ err, request_id: res.locals.requestId, method: req.method, path: req.path }, 'unhandled error');
      apiError = new ApiError('internal_error', `Something went wrong on our side (request ${res.locals.requestId}).`);
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    sendError(res, apiError);
  };
}
