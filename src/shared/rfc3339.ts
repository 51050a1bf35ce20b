import { ApiError } from '../errors/api-error';

/**
 * The one parser of RFC 3339 `date-time` values (JSON Schema's `format: date-time`), used by the
 * spec validator's format check, the query-parameter layer and every service that reads a
 * timestamp. `Date.parse` is never given client input: it accepts non-RFC forms, and it shifts
 * calendar-invalid dates (`2030-02-30` becomes 2 March) instead of refusing them.
 *
 * Accepted, as in RFC 3339 section 5.6: `YYYY-MM-DD`, `T` or `t`, `hh:mm:ss`, optional fraction
 * (any number of digits, kept to the millisecond), then `Z`, `z` or `+hh:mm` / `-hh:mm`. Days
 * must exist in their month (leap years included); a leap second (`:60`) is accepted where it
 * can occur, at 23:59 UTC, and is read as the first instant of the next minute, as POSIX time does.
 */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysIn(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return month === 2 && leap ? 29 : (DAYS_IN_MONTH[month - 1] ?? 0);
}

/** Milliseconds since the epoch, or null when `text` is not a valid RFC 3339 date-time. */
export function parseRfc3339(text: string): number | null {
  const match = DATE_TIME.exec(text);
  if (!match) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = match[7] ?? '';
  const offsetSign = match[9] === '-' ? -1 : 1;
  const offsetHours = match[10] === undefined ? 0 : Number(match[10]);
  const offsetMinutes = match[11] === undefined ? 0 : Number(match[11]);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 60 || offsetHours > 23 || offsetMinutes > 59) return null;
  const offsetMs = offsetSign * (offsetHours * 60 + offsetMinutes) * 60_000;
  const millis = Number(fraction.slice(0, 3).padEnd(3, '0'));
  // Date.UTC reads years 0-99 as 1900-1999; build from year 2000 and move the year afterwards.
  const local = new Date(Date.UTC(2000, month - 1, day, hour, minute, Math.min(second, 59), millis));
  local.setUTCFullYear(year);
  const utc = local.getTime() - offsetMs;
  if (second === 60) {
    // A leap second exists only as the last second of a UTC minute 23:59.
    const at = new Date(utc);
    if (at.getUTCHours() !== 23 || at.getUTCMinutes() !== 59) return null;
    return utc + 1000;
  }
  return utc;
}

/** Parses a client's date-time or refuses it with 400 `invalid_request` naming `param`. */
export function parseTimestamp(text: string, param: string): number {
  const at = parseRfc3339(text);
  if (at === null) {
    throw new ApiError('invalid_request', `${param}: must be an RFC 3339 date-time that exists, e.g. 2030-01-31T23:59:59Z or 2030-01-31T23:59:59.5+01:00.`, {
      param,
    });
  }
  return at;
}
