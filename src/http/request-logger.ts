import type { Request, Response } from 'express';
import type { Logger } from 'pino';

/** One structured line per request. Headers and bodies are never logged: they carry secrets. */
export function logRequest(logger: Logger, req: Request, res: Response, startedNs: bigint): void {
  logger.info(
    {
      request_id: res.locals.requestId,
      method: req.method,
      path: req.path,
      status: res.statusCode,
      ms: Number(process.hrtime.bigint() - startedNs) / 1e6,
      key_id: res.locals.principal?.kind === 'client' ? res.locals.principal.key.id : undefined,
    },
    'request',
  );
}
