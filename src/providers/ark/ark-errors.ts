import type { ErrorRule } from '../error-table';

/**
 * Ark's error codes (Ark "错误码" table, volcengine.com/docs/82379/1299023; BytePlus
 * docs.byteplus.com/en/docs/ModelArk/1299023). Moderation codes come as families of dotted
 * sub-codes (`InputImageSensitiveContentDetected.PrivacyInformation`), matched by pattern; input
 * vs output by prefix. Answers no row covers go by HTTP status (images-api-client.ts).
 */
export const ARK_ERRORS: readonly ErrorRule[] = [
  { codes: ['Output*SensitiveContentDetected*', 'Output*RiskDetection*'], kind: 'output' },
  { codes: ['*SensitiveContentDetected*', '*RiskDetection*'], kind: 'content' },
  // The account's spend cap (SetLimitExceeded, "安心体验模式"), quota, arrears and unopened services do not clear by retrying.
  { codes: ['AuthenticationError', 'AccessDenied', 'AccountOverdueError', 'OperationDenied*', 'SetLimitExceeded', 'QuotaExceeded'], kind: 'account' },
  // The model or endpoint is not open on this account: another channel may have it.
  { codes: ['InvalidEndpointOrModel*', 'ModelNotOpen'], kind: 'configuration' },
  // The moderation service itself is down (HTTP 500): documented as retryable.
  { codes: ['ContentSecurityDetectionError'], kind: 'transient' },
  { codes: ['RateLimitExceeded*', '*RateLimitExceeded', 'InflightBatchsizeExceeded', 'RequestBurstTooFast', 'ServerOverloaded'], kind: 'busy' },
];
