import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * JSON logs to stdout, written asynchronously (a line per request must not cost a blocking write;
 * main.ts flushes on shutdown). Redaction is a second line of defence: no code path logs headers or keys.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'creative-gateway' },
      redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'key', 'adminSecret'], censor: '[redacted]' },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
