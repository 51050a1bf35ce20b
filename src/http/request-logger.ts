import type { Request, Response } from 'express';
import type { Logger } from 'pino';

/** One structured line per request. Headers and bodies are never logged: they carry secrets. */
export function logRequest(logger: Logger, req: Request, res: Response, startedNs: bigint): void {
  logger.info(
    {
      request_id: res.locals.requestId,
      method: req.method,
      // The full path: req.path is relative to the router that mounted it (/docs/scalar.js logged as /scalar.js).
      path: req.originalUrl.split('?', 1)[0],
      status: res.statusCode,
      ms: Number(process.hrtime.bigint() - startedNs) / 1e6,
      key_id: res.locals.principal?.kind === 'client' ? res.locals.principal.key.id : undefined,
    },
    'request',
  );
}
