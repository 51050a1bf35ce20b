import type { ErrorRule } from '../error-table';

/**
 * Gemini's answers, by the codes the client reads from them (gemini-client.ts `errorCodes`,
 * `refusalCodes`), most specific first: `quota.PerDay` for a QuotaFailure naming a per-day quota, an error's `details[].reason` (google.rpc.ErrorInfo, e.g.
 * `API_KEY_INVALID`), its canonical `status` (ai.google.dev/gemini-api/docs/troubleshooting, "Backend
 * service error codes"), then `http_<status>`; a 200 answer's `promptFeedback.blockReason` as
 * `blockReason.<REASON>` and its candidate's `finishReason` as `finishReason.<REASON>` (enums
 * `BlockedReason` and `FinishReason` of googleapis/js-genai src/types.ts). First matching row wins.
 * Answers no row covers go by HTTP status (a 200 without an image is a billed call that failed).
 */
export const GEMINI_ERRORS: readonly ErrorRule[] = [
  // The prompt or an input image was refused: any prompt block (SAFETY, OTHER, BLOCKLIST,
  // PROHIBITED_CONTENT, IMAGE_SAFETY), or a candidate stopped because of what it was asked.
  { codes: ['blockReason.*', 'finishReason.SAFETY', 'finishReason.PROHIBITED_CONTENT', 'finishReason.BLOCKLIST', 'finishReason.SPII'], kind: 'content' },
  // The image was generated and withheld: it breaks the safety policy, or recites a source.
  { codes: ['finishReason.IMAGE_SAFETY', 'finishReason.IMAGE_PROHIBITED_CONTENT', 'finishReason.IMAGE_RECITATION', 'finishReason.RECITATION'], kind: 'output' },
  // An invalid or expired key (400 INVALID_ARGUMENT with reason API_KEY_INVALID), a key without access
  // to the API or project (403 PERMISSION_DENIED), no credentials (401), and FAILED_PRECONDITION (400:
  // the free tier is not available in the account's country, billing must be enabled).
  { codes: ['API_KEY_*', 'UNAUTHENTICATED', 'PERMISSION_DENIED', 'FAILED_PRECONDITION', 'http_401', 'http_403'], kind: 'account' },
  // The model id is not one this account (or API version) has: another channel may serve it.
  { codes: ['NOT_FOUND', 'http_404'], kind: 'configuration' },
  // 429 naming an exhausted per-day quota (a QuotaFailure whose quotaId has `PerDay`, read as `quota.PerDay`):
  // nothing frees it before the quota resets (midnight Pacific time), so the account is unusable until then:
  // the channel is disabled, and the probe puts it back once a call passes again. Before the busy row.
  { codes: ['quota.PerDay'], kind: 'account' },
  // 429: the account's rate limit (requests or tokens per minute); the answer's RetryInfo says when to retry.
  { codes: ['RESOURCE_EXHAUSTED', 'http_429'], kind: 'busy' },
  // 500 INTERNAL and 503 UNAVAILABLE (overloaded or down): Google's side, retry. 504 DEADLINE_EXCEEDED
  // is not here: the call may have run, so it is never sent again.
  { codes: ['INTERNAL', 'UNAVAILABLE', 'http_500', 'http_503'], kind: 'transient' },
];
