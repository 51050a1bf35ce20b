import { ApiError } from '../../src/errors/api-error';
import { parseRfc3339, parseTimestamp } from '../../src/shared/rfc3339';

/** The one RFC 3339 `date-time` parser (section 5.6), never Date.parse on client input. */
describe('parseRfc3339', () => {
  const utc = (y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0) => Date.UTC(y, mo - 1, d, h, mi, s, ms);

  it.each([
    ['2030-01-31T23:59:59Z', utc(2030, 1, 31, 23, 59, 59)],
    ['2030-01-31t23:59:59z', utc(2030, 1, 31, 23, 59, 59)],
    ['1970-01-01T00:00:00Z', 0],
    ['1969-12-31T23:59:59Z', -1000],
    ['2030-01-31T23:59:59+00:00', utc(2030, 1, 31, 23, 59, 59)],
    ['2030-01-31T23:59:59-00:00', utc(2030, 1, 31, 23, 59, 59)],
    ['2030-01-31T23:59:59+01:00', utc(2030, 1, 31, 22, 59, 59)],
    ['2030-01-31T23:59:59-05:30', utc(2030, 2, 1, 5, 29, 59)],
    ['2030-01-01T00:00:00+23:59', utc(2029, 12, 31, 0, 1)],
    ['2030-01-31T23:59:59.5Z', utc(2030, 1, 31, 23, 59, 59, 500)],
    ['2030-01-31T23:59:59.05Z', utc(2030, 1, 31, 23, 59, 59, 50)],
    ['2030-01-31T23:59:59.123Z', utc(2030, 1, 31, 23, 59, 59, 123)],
    // Digits past the millisecond are dropped, not rounded.
    ['2030-01-31T23:59:59.123999999Z', utc(2030, 1, 31, 23, 59, 59, 123)],
    ['2030-01-31T23:59:59.0Z', utc(2030, 1, 31, 23, 59, 59)],
  ])('reads %s', (text, expected) => {
    expect(parseRfc3339(text)).toBe(expected);
  });

  it('checks days against their month, leap years included', () => {
    expect(parseRfc3339('2028-02-29T00:00:00Z')).toBe(utc(2028, 2, 29));
    expect(parseRfc3339('2000-02-29T00:00:00Z')).toBe(utc(2000, 2, 29));
    expect(parseRfc3339('2030-02-29T00:00:00Z')).toBeNull();
    expect(parseRfc3339('1900-02-29T00:00:00Z')).toBeNull();
    expect(parseRfc3339('2030-02-30T00:00:00Z')).toBeNull();
    expect(parseRfc3339('2030-04-31T00:00:00Z')).toBeNull();
    expect(parseRfc3339('2030-12-31T00:00:00Z')).toBe(utc(2030, 12, 31));
    expect(parseRfc3339('2030-01-00T00:00:00Z')).toBeNull();
    expect(parseRfc3339('2030-00-10T00:00:00Z')).toBeNull();
    expect(parseRfc3339('2030-13-01T00:00:00Z')).toBeNull();
  });

  it('reads years 0000-0099 as themselves, not as 1900-1999', () => {
    const year = (text: string) => new Date(parseRfc3339(text) as number).getUTCFullYear();
    expect(year('0099-06-15T00:00:00Z')).toBe(99);
    expect(year('0000-01-01T00:00:00Z')).toBe(0);
    expect(parseRfc3339('0004-02-29T12:00:00Z')).not.toBeNull();
    expect(new Date(parseRfc3339('0004-02-29T12:00:00Z') as number).toISOString()).toBe('0004-02-29T12:00:00.000Z');
    expect(year('9999-12-31T23:59:59Z')).toBe(9999);
  });

  it('refuses out-of-range times and offsets', () => {
    for (const text of ['2030-01-01T24:00:00Z', '2030-01-01T23:60:00Z', '2030-01-01T23:59:61Z', '2030-01-01T00:00:00+24:00', '2030-01-01T00:00:00+01:60']) {
      expect(parseRfc3339(text)).toBeNull();
    }
  });

  it('accepts a leap second only at 23:59 UTC, as the first instant of the next minute', () => {
    expect(parseRfc3339('2016-12-31T23:59:60Z')).toBe(utc(2017, 1, 1));
    expect(parseRfc3339('2016-12-31T23:59:60.5Z')).toBe(utc(2017, 1, 1, 0, 0, 0, 500));
    // 23:59 UTC written in another offset.
    expect(parseRfc3339('2016-12-31T15:59:60-08:00')).toBe(utc(2017, 1, 1));
    expect(parseRfc3339('2017-01-01T00:59:60+01:00')).toBe(utc(2017, 1, 1));
    // 23:59 local but not UTC, or not the last minute of the hour.
    expect(parseRfc3339('2016-12-31T23:59:60+01:00')).toBeNull();
    expect(parseRfc3339('2016-12-31T23:58:60Z')).toBeNull();
    expect(parseRfc3339('2016-12-31T12:59:60Z')).toBeNull();
  });

  it.each([
    '',
    '2030-01-31',
    '2030-01-31T23:59:59',
    '2030-01-31 23:59:59Z',
    '2030-01-31T23:59Z',
    '2030-1-31T23:59:59Z',
    '30-01-31T23:59:59Z',
    '+002030-01-31T23:59:59Z',
    '2030-01-31T23:59:59.Z',
    '2030-01-31T23:59:59,5Z',
    '2030-01-31T23:59:59+0100',
    '2030-01-31T23:59:59+01',
    '2030-01-31T23:59:59 Z',
    ' 2030-01-31T23:59:59Z',
    '2030-01-31T23:59:59Z ',
    '2030-01-31T23:59:59ZZ',
    '2030-01-31T23:59:59GMT',
    'Thu, 31 Jan 2030 23:59:59 GMT',
    '1893456000',
    '２０３０-01-31T23:59:59Z',
  ])('refuses %j', (text) => {
    expect(parseRfc3339(text)).toBeNull();
  });

  it('every RFC 3339 form parses, nothing else does, and no date is shifted', () => {
    expect(parseRfc3339('2030-06-30T23:59:60Z')).toBe(Date.UTC(2030, 6, 1));
    expect(parseRfc3339('2030-06-30t15:59:60.5-08:00')).toBe(Date.UTC(2030, 6, 1, 0, 0, 0, 500));
    expect(parseRfc3339('2030-01-01t00:00:00z')).toBe(Date.UTC(2030, 0, 1));
    expect(parseRfc3339('2030-01-01T01:00:00.123456789+01:00')).toBe(Date.UTC(2030, 0, 1, 0, 0, 0, 123));
    expect(parseRfc3339('2028-02-29T00:00:00Z')).toBe(Date.UTC(2028, 1, 29));
    expect(parseRfc3339('0001-01-01T00:00:00Z')).toBe(-62_135_596_800_000);
    for (const bad of [
      '2030-02-30T00:00:00Z',
      '2029-02-29T00:00:00Z',
      '2030-04-31T00:00:00Z',
      '2030-13-01T00:00:00Z',
      '2030-01-01T24:00:00Z',
      '2030-01-01T12:59:60Z',
      '2030-01-01T00:00:00',
      '2030-01-01 00:00:00Z',
      '2030-01-01T00:00:00+24:00',
      'Infinity',
      '2030-01-01',
      '+002030-01-01T00:00:00Z',
    ]) {
      expect({ bad, parsed: parseRfc3339(bad) }).toEqual({ bad, parsed: null });
    }
  });
});

describe('parseTimestamp', () => {
  it('answers the instant of a valid date-time', () => {
    expect(parseTimestamp('2030-01-31T23:59:59.5+01:00', 'since')).toBe(Date.UTC(2030, 0, 31, 22, 59, 59, 500));
  });

  it('refuses anything else with 400 invalid_request naming the parameter', () => {
    let error: unknown;
    try {
      parseTimestamp('2030-02-30T00:00:00Z', 'created_after');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'created_after' });
    expect((error as ApiError).message).toBe(
      'created_after: must be an RFC 3339 date-time that exists, e.g. 2030-01-31T23:59:59Z or 2030-01-31T23:59:59.5+01:00.',
    );
  });
});
