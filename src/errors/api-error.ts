import { ERROR_CODES, type ErrorCode } from './error-codes';

export interface ApiErrorOptions {
  /** The request field at fault. */
  param?: string | null;
  /** Extra fields in the error object (e.g. `period_resets_at`). */
  details?: Record<string, string>;
  /** Response headers to send with the error (e.g. `Retry-After`). */
  headers?: Record<string, string>;
}

/** An error meant for the client: its code decides status and type (see ERROR_CODES). */
export class ApiError extends Error {
  readonly status: number;
  readonly param: string | null;
  readonly details: Record<string, string>;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_CODES[code].status;
    this.param = options.param ?? null;
    this.details = options.details ?? {};
    this.headers = options.headers ?? {};
  }
}
