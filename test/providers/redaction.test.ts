import { MAX_UPSTREAM_TEXT, redactUpstreamText } from '../../src/providers/redaction';
import { UpstreamError, registerAccountSecrets, upstream } from '../../src/providers/upstream-errors';

describe('redactUpstreamText (upstream text is untrusted)', () => {
  it('removes the account secrets given, wherever they appear', () => {
    const out = redactUpstreamText('key my-own-account-key-42 rejected; echo: xmy-own-account-key-42x', ['my-own-account-key-42']);
    expect(out).not.toContain('my-own-account-key-42');
    expect(out).toBe('key [redacted] rejected; echo: x[redacted]x');
  });

  it('replaces a longer secret whole when it contains a shorter one, and ignores too-short ones', () => {
    expect(redactUpstreamText('abcdefgh-12345 and abc', ['abcdefgh', 'abcdefgh-12345', 'abc'])).toBe('[redacted] and abc');
  });

  it.each([
    ['Authorization: Bearer whatever.token-value', 'whatever.token-value'],
    ['got header "Bearer abc123"', 'abc123'],
    ['Authorization: Basic dXNlcjpwYXNzd29yZA==', 'dXNlcjpwYXNzd29yZA=='],
    ['invalid key sk-proj-AbCdEf0123456789xyz', 'sk-proj-AbCdEf0123456789xyz'],
    ['client key hyai_0123456789abcdefABCDEF used', 'hyai_0123456789abcdefABCDEF'],
    ['api_key=plain-secret-value&x=1', 'plain-secret-value'],
    ['{"api-key": "json-secret-value"}', 'json-secret-value'],
    ['x-api-key: header-secret-value', 'header-secret-value'],
    ['HMAC-SHA256 Credential=AKLTabcdefghijklmnop/20250101/cn-north-1/cv/request, Signature=0123abcd', 'AKLTabcdefghijklmnop'],
    ['Signature=0123456789abcdef0123456789abcdef', '0123456789abcdef0123456789abcdef'],
    ['access key AKIAIOSFODNN7EXAMPLE is disabled', 'AKIAIOSFODNN7EXAMPLE'],
    ['secret WnJ4Y2ZmS1VzZ3hOb0FkMnN0dWZmMTIzNDU2Nzg5MA== leaked', 'WnJ4Y2ZmS1VzZ3hOb0FkMnN0dWZmMTIzNDU2Nzg5MA=='],
    ['secret_access_key: V2l0aFNlY3JldA', 'V2l0aFNlY3JldA'],
  ])('redacts credential shapes: %s', (text, secret) => {
    const out = redactUpstreamText(text);
    expect(out).not.toContain(secret);
    expect(out).toContain('[redacted]');
  });

  it('keeps ordinary error text readable', () => {
    const text = 'HTTP 401 AuthenticationError The API key is invalid (request 2025010112345678901234, task 7392616336912345678)';
    expect(redactUpstreamText(text)).toBe(text);
    expect(redactUpstreamText('SignatureDoesNotMatch: the signature does not match')).toBe('SignatureDoesNotMatch: the signature does not match');
    expect(redactUpstreamText('Invalid token provided for the basic plan')).toBe('Invalid token provided for the basic plan');
  });

  it('drops control characters (forged log lines) and bounds the length', () => {
    expect(redactUpstreamText('line one\n{"level":60}\r\u001b[31m')).toBe('line one {"level":60} [31m');
    const long = redactUpstreamText('word '.repeat(1000));
    expect(long).toHaveLength(MAX_UPSTREAM_TEXT);
    expect(long.endsWith('…')).toBe(true);
  });

  it('is applied by UpstreamError to its message and account problem, with every registered account secret', () => {
    registerAccountSecrets('registered-account-secret-7');
    const error = upstream.failed('jimeng', 'HTTP 401 you sent registered-account-secret-7', { accountProblem: 'Bearer registered-account-secret-7 revoked' });
    expect(error.message).toBe('Provider jimeng failed: HTTP 401 you sent [redacted]');
    expect(error.stack).not.toContain('registered-account-secret-7');
    expect(error.traits.accountProblem).toBe('Bearer [redacted] revoked');
    expect(new UpstreamError('provider_error', 'x'.repeat(2000)).message).toHaveLength(MAX_UPSTREAM_TEXT);
  });
});
