import { ApiError } from '../../src/errors/api-error';
import { thrownApiError } from '../helpers/thrown-api-error';
import { DAY_MS } from '../../src/shared/clock';
import { futureExpiry, requestedExpiry } from '../../src/shared/expiry';

/** `expires_at` / `expires_in_days` of key and admin-token create requests. */
describe('expiry', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');

  it('futureExpiry: an RFC 3339 instant after now, as epoch ms (any offset)', () => {
    expect(futureExpiry('2030-01-01T00:00:00.001Z', now)).toBe(now + 1);
    expect(futureExpiry('2030-01-01T08:00:00+08:00', now - 1)).toBe(now);
    expect(() => futureExpiry('2030-01-01T08:00:00+08:00', now)).toThrow(ApiError);
    expect(futureExpiry('2030-01-01T00:00:01+00:00', now)).toBe(now + 1000);
  });

  it('futureExpiry: now itself and the past are 400 invalid_request, param expires_at', () => {
    for (const text of ['2030-01-01T00:00:00Z', '2029-12-31T23:59:59.999Z', '1970-01-01T00:00:00Z']) {
      const error = thrownApiError(() => futureExpiry(text, now));
      expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'expires_at', message: 'expires_at must be in the future.' });
    }
  });

  it('futureExpiry: a value that is not a date-time is refused by the parser, naming expires_at', () => {
    for (const text of ['2030-02-30T00:00:00Z', 'tomorrow', '2031-01-01', '2031-01-01T00:00:00']) {
      const error = thrownApiError(() => futureExpiry(text, now));
      expect(error).toMatchObject({ code: 'invalid_request', param: 'expires_at' });
      expect(error.message).toMatch(/^expires_at: must be an RFC 3339 date-time/);
    }
  });

  it('requestedExpiry: none asked is null (never expires)', () => {
    expect(requestedExpiry({}, now)).toBeNull();
  });

  it('requestedExpiry: expires_in_days counts whole days of 24 h from now', () => {
    expect(requestedExpiry({ expires_in_days: 1 }, now)).toBe(now + DAY_MS);
    expect(requestedExpiry({ expires_in_days: 36500 }, now)).toBe(now + 36500 * DAY_MS);
  });

  it('requestedExpiry: expires_at is checked as futureExpiry checks it', () => {
    expect(requestedExpiry({ expires_at: '2030-06-01T00:00:00Z' }, now)).toBe(Date.parse('2030-06-01T00:00:00Z'));
    expect(thrownApiError(() => requestedExpiry({ expires_at: '2020-06-01T00:00:00Z' }, now)).param).toBe('expires_at');
  });

  it('requestedExpiry: both given is refused before either is read', () => {
    const error = thrownApiError(() => requestedExpiry({ expires_at: 'not even a date', expires_in_days: 3 }, now));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'expires_at', message: 'Give expires_at or expires_in_days, not both.' });
  });
});
