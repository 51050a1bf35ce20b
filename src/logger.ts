import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Fields censored wherever a log line's object carries them (to three levels deep): credentials, and
 * prompts and request bodies, which no line may hold at any level (docs/operators/security.md,
 * "Prompts"). A second line of defence: no code path logs headers, keys, bodies or prompts, and
 * upstream text that quotes a prompt has it removed where it enters (src/providers/redaction.ts).
 */
const CREDENTIAL_FIELDS = ['authorization', 'key', 'adminSecret'];
const PROMPT_FIELDS = ['prompt', 'negativePrompt', 'negative_prompt', 'revised_prompt', 'body'];

export const REDACTED_LOG_PATHS: readonly string[] = [
  'req.headers.authorization',
  'headers.authorization',
  ...CREDENTIAL_FIELDS,
  ...PROMPT_FIELDS.flatMap((field) => [field, `*.${field}`, `*.*.${field}`]),
];

/**
 * JSON logs to stdout, written asynchronously (a line per request must not cost a blocking write;
 * main.ts flushes on shutdown).
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'creative-gateway' },
      redact: { paths: [...REDACTED_LOG_PATHS], censor: '[redacted]' },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
