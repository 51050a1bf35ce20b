import { ARK_ERRORS } from '../../src/providers/ark/ark-errors';
import { kindOf } from '../../src/providers/error-table';

/**
 * Ark's error codes as its table classifies them, whatever HTTP status carries them (Ark "错误码"
 * table, volcengine.com/docs/82379/1299023). The answers themselves, on the fake Ark:
 * test/providers/ark-error-table.test.ts and test/channels/channels.test.ts.
 */
describe('Ark error table (pure)', () => {
  it.each([
    ['AccountOverdueError', 'account'],
    ['OperationDenied.ServiceOverdue', 'account'],
    ['OperationDenied.ServiceNotOpen', 'account'],
    ['SetLimitExceeded', 'account'],
    ['QuotaExceeded', 'account'],
    ['AuthenticationError', 'account'],
    ['InvalidEndpointOrModel.NotFound', 'configuration'],
    ['InvalidEndpointOrModel.ModelIDAccessDisabled', 'configuration'],
    ['ModelNotOpen', 'configuration'],
    ['ContentSecurityDetectionError', 'transient'],
    ['InputImageSensitiveContentDetected.PrivacyInformation', 'content'],
    ['SensitiveContentDetected.SevereViolation', 'content'],
    ['InputTextRiskDetection', 'content'],
    ['OutputImageSensitiveContentDetected.PolicyViolation', 'output'],
    ['OutputTextRiskDetection', 'output'],
    ['ModelAccountIpmRateLimitExceeded', 'busy'],
    ['RateLimitExceeded.EndpointRPMExceeded', 'busy'],
    ['ServerOverloaded', 'busy'],
    ['InternalServiceError', undefined],
  ])('%s is %s', (code, kind) => {
    expect(kindOf(ARK_ERRORS, code)).toBe(kind);
  });
});
