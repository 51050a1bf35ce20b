import type { RequestHandler } from 'express';
import type { Logger } from 'pino';

/** One structured line per request. Headers and bodies are never logged: they carry secrets. */
export function requestLogger(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      logger.info(
        {
          request_id: res.locals.requestId,
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
          key_id: res.locals.apiKey?.id,
        },
        'request',
      );
    });
    next();
  };
}
