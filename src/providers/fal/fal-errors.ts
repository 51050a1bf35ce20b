import type { ErrorRule } from '../error-table';

/**
 * fal's answers, by the code the client reads from them (fal-client.ts `codesOf`): a model error's
 * `detail[].type` (fal.ai/docs/documentation/model-apis/errors), a platform error's `error_type`
 * (…/model-apis/request-errors), a result's `has_nsfw_concepts` flag, else `http_<status>`. First
 * matching row wins. A 422 no row covers is the client's invalid request (fal-client.ts); other
 * answers no row covers go by HTTP status.
 */
export const FAL_ERRORS: readonly ErrorRule[] = [
  // A content checker flagged the prompt or an input image (422, not retryable).
  { codes: ['content_policy_violation'], kind: 'content' },
  // The app's safety checker flagged a generated image (FLUX: `has_nsfw_concepts`, the image withheld).
  { codes: ['has_nsfw_concepts'], kind: 'output' },
  // 401 "No user found for Key ID and Secret"; 403 "User is locked. Reason: Exhausted balance" / "Admin lock".
  { codes: ['http_401', 'http_403'], kind: 'account' },
  // The app id does not exist (or this key may not run it): another channel may serve the model.
  { codes: ['http_404'], kind: 'configuration' },
  // The account's concurrency or queue-length limit; no runner could be allocated.
  { codes: ['http_429', 'runner_scheduling_failure'], kind: 'busy' },
  // The queue itself failed before it took the request (fal does not bill 5xx answers).
  { codes: ['http_500', 'http_502', 'http_503'], kind: 'transient' },
];
