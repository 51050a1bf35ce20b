import type { ErrorRule } from '../error-table';

/**
 * BFL's answers (docs.bfl.ai/api_integration/errors, help.bfl.ai "Why did my request fail?"). The
 * API has no error codes of its own: an HTTP answer is read as `http_<status>`, a task's end as its
 * `status` from `get_result`.
 * - 401 / 403 (the key is refused or lacks access) and 402 (insufficient credits) are the account's:
 *   the channel is disabled, nothing is retried;
 * - 429 ("You exceeded your concurrency limit": back off until a previous task finishes) is busy;
 * - 500 and 503 ("Retry with exponential backoff") are transient; a 504 from a proxy in front says
 *   nothing about acceptance and is left to the HTTP status rule (upstream-errors.ts);
 * - `Request Moderated` (the input was flagged before processing) is the client's content,
 *   `Content Moderated` (the output was flagged) its output; BFL charges neither.
 * A task that ends in `Error` or `Task not found` has no row: it was accepted, so it fails there
 * (bfl-client.ts), never sent elsewhere.
 */
export const BFL_ERRORS: readonly ErrorRule[] = [
  { codes: ['Request Moderated'], kind: 'content' },
  { codes: ['Content Moderated'], kind: 'output' },
  { codes: ['http_401', 'http_402', 'http_403'], kind: 'account' },
  { codes: ['http_429'], kind: 'busy' },
  { codes: ['http_500', 'http_503'], kind: 'transient' },
];
