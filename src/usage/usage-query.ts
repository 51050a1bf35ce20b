import { createHash } from 'node:crypto';
import { ApiError } from '../errors/api-error';
import { type CursorCodec, invalidCursor } from '../shared/cursor';
import { parseTimestamp } from '../shared/rfc3339';

/**
 * The pure side of GET /admin/usage: ranges, buckets, group-by dimensions, the page cursor.
 * Times are epoch milliseconds; rollup rows start on whole UTC hours.
 */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
const MAX_RANGE_DAYS = 366;
const MAX_HOUR_BUCKET_DAYS = 31;
const MAX_METADATA_DIMENSIONS = 3;

export type UsageBucket = 'hour' | 'day' | 'month';

export type UsageDimension =
  | { kind: 'key' }
  | { kind: 'owner' }
  | { kind: 'project' }
  | { kind: 'model' }
  | { kind: 'provider' }
  | { kind: 'channel' }
  | { kind: 'metadata'; name: string };

export interface UsageRange {
  from: number;
  to: number;
}

/**
 * `from` and `to` as whole UTC hours, `to` after `from`, within the bounds the spec states. Left out,
 * `to` is the end of the current hour (at `now`) and `from` the start of the calendar month (UTC) of
 * the range's last hour: the month so far, by default.
 */
export function parseRange(fromText: string | undefined, toText: string | undefined, bucket: UsageBucket | undefined, now: number): UsageRange {
  const to = toText === undefined ? Math.floor(now / HOUR_MS) * HOUR_MS + HOUR_MS : parseTimestamp(toText, 'to');
  const from = fromText === undefined ? bucketStartOf(to - HOUR_MS, 'month') : parseTimestamp(fromText, 'from');
  if (from % HOUR_MS !== 0) throw new ApiError('invalid_request', 'from: must be a whole UTC hour (minutes, seconds and fractions zero).', { param: 'from' });
  if (to % HOUR_MS !== 0) throw new ApiError('invalid_request', 'to: must be a whole UTC hour (minutes, seconds and fractions zero).', { param: 'to' });
  if (!(to > from)) throw new ApiError('invalid_request', 'to: must be after from.', { param: 'to' });
  if (to - from > MAX_RANGE_DAYS * DAY_MS) throw new ApiError('invalid_request', `to: the range may span at most ${MAX_RANGE_DAYS} days.`, { param: 'to' });
  if (bucket === 'hour' && to - from > MAX_HOUR_BUCKET_DAYS * DAY_MS) {
    throw new ApiError('invalid_request', `bucket: hour buckets need a range of at most ${MAX_HOUR_BUCKET_DAYS} days.`, { param: 'bucket' });
  }
  return { from, to };
}

/** `key,model,metadata.team` into dimensions, each at most once, at most three metadata entries. */
export function parseGroupBy(text: string | undefined): UsageDimension[] {
  if (text === undefined || text === '') return [];
  const seen = new Set<string>();
  const dimensions: UsageDimension[] = [];
  for (const part of text.split(',')) {
    if (seen.has(part)) throw new ApiError('invalid_request', `group_by: ${part} is named twice.`, { param: 'group_by' });
    seen.add(part);
    const metadata = /^metadata\.([A-Za-z0-9_-]{1,40})$/.exec(part);
    if (metadata) dimensions.push({ kind: 'metadata', name: metadata[1] as string });
    else if (part === 'key' || part === 'owner' || part === 'project' || part === 'model' || part === 'provider' || part === 'channel')
      dimensions.push({ kind: part });
    else
      throw new ApiError('invalid_request', `group_by: ${part} is not a dimension (key, owner, project, model, provider, channel, metadata.<name>).`, {
        param: 'group_by',
      });
  }
  if (dimensions.filter((d) => d.kind === 'metadata').length > MAX_METADATA_DIMENSIONS) {
    throw new ApiError('invalid_request', `group_by: at most ${MAX_METADATA_DIMENSIONS} metadata entries.`, { param: 'group_by' });
  }
  return dimensions;
}

/** `name:value` (the listKeys form) into its parts. */
export function parseMetadataFilter(text: string | undefined): { name: string; value: string } | undefined {
  if (text === undefined) return undefined;
  const colon = text.indexOf(':');
  const name = text.slice(0, colon);
  if (colon < 1 || !/^[A-Za-z0-9_-]{1,40}$/.test(name)) throw new ApiError('invalid_request', 'metadata: write it name:value.', { param: 'metadata' });
  return { name, value: text.slice(colon + 1) };
}

/** Starts of the calendar months (UTC) that [from, to) touches, the first at or before `from`. */
export function monthStarts(range: UsageRange): number[] {
  const first = new Date(range.from);
  const starts: number[] = [];
  for (let month = Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), 1); month < range.to;) {
    starts.push(month);
    const at = new Date(month);
    month = Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
  }
  return starts;
}

/** The start of the bucket an hour falls in: what the SQL bucket expression computes, for tests and the page bounds. */
export function bucketStartOf(hourStart: number, bucket: UsageBucket): number {
  if (bucket === 'hour') return hourStart - (hourStart % HOUR_MS);
  if (bucket === 'day') return hourStart - (hourStart % DAY_MS);
  const at = new Date(hourStart);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1);
}

/**
 * The SQL form of bucketStartOf(t, 'month') for an expression of epoch milliseconds, as the
 * settlement writes usage_key_months (the engines' own calendar functions, UTC).
 */
export function monthStartSql(expression: string, postgres: boolean): string {
  return postgres
    ? `CAST(extract(epoch FROM date_trunc('month', to_timestamp(${expression} / 1000) AT TIME ZONE 'UTC')) AS bigint) * 1000`
    : `CAST(strftime('%s', ${expression} / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000`;
}

/** The rollup grains a range is read in: hours, whole UTC days, whole calendar months. */
export type RollupGrain = 'hour' | 'day' | 'month';

/** Rows of one grain whose start lies in [from, to), added (sign 1) or taken off (sign -1). */
export interface RangePiece {
  grain: RollupGrain;
  from: number;
  to: number;
  sign: 1 | -1;
}

/**
 * What a month's rows per key cost to read, in days' rows: a key active on some day of a month has
 * one month row, so a month reads about as many rows as a few busy days.
 */
const MONTH_COST_IN_DAYS = 4;

/**
 * [from, to) (whole hours) as signed pieces of rollup rows, no coarser than `coarsest`, whose sum is
 * exactly the range's: hours at the edges, whole days between, and whole months where they fit.
 * A month the range covers only partly is read as the month less its uncovered days when that reads
 * fewer rows than its covered days (the tail of the current month: its future days have no rows).
 * Exact because each coarser row is the sum of its finer rows, written in one transaction.
 */
export function coverRange(range: UsageRange, coarsest: RollupGrain): RangePiece[] {
  const { from, to } = range;
  const dayFrom = Math.ceil(from / DAY_MS) * DAY_MS;
  const dayTo = Math.floor(to / DAY_MS) * DAY_MS;
  if (coarsest === 'hour' || dayFrom >= dayTo) return [{ grain: 'hour', from, to, sign: 1 }];
  const pieces: RangePiece[] = [];
  if (from < dayFrom) pieces.push({ grain: 'hour', from, to: dayFrom, sign: 1 });
  if (coarsest === 'day') pieces.push({ grain: 'day', from: dayFrom, to: dayTo, sign: 1 });
  else {
    for (const month of monthStarts({ from: dayFrom, to: dayTo })) {
      const end = bucketEndOf(month, 'month');
      const covered = { from: Math.max(month, dayFrom), to: Math.min(end, dayTo) };
      const coveredDays = (covered.to - covered.from) / DAY_MS;
      const uncoveredDays = (end - month) / DAY_MS - coveredDays;
      if (uncoveredDays === 0 || uncoveredDays + MONTH_COST_IN_DAYS < coveredDays) {
        pieces.push({ grain: 'month', from: month, to: end, sign: 1 });
        if (month < covered.from) pieces.push({ grain: 'day', from: month, to: covered.from, sign: -1 });
        if (covered.to < end) pieces.push({ grain: 'day', from: covered.to, to: end, sign: -1 });
      } else {
        const last = pieces[pieces.length - 1];
        // Days that continue the previous piece's days are one piece.
        if (last?.grain === 'day' && last.sign === 1 && last.to === covered.from) last.to = covered.to;
        else pieces.push({ grain: 'day', ...covered, sign: 1 });
      }
    }
  }
  if (dayTo < to) pieces.push({ grain: 'hour', from: dayTo, to, sign: 1 });
  return pieces;
}

/** The end of the bucket starting at `start`. */
export function bucketEndOf(start: number, bucket: UsageBucket): number {
  if (bucket === 'hour') return start + HOUR_MS;
  if (bucket === 'day') return start + DAY_MS;
  const at = new Date(start);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
}

/** A page position: the sort values of the last row, bound to the query it came from. */
export type SortValue = string | number;

/** The cursor kind of usage pages (the MAC binds it: a list's cursor does not open here). */
const USAGE_CURSOR = 'usage';

export function queryFingerprint(parts: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 16);
}

export function encodeUsageCursor(cursors: CursorCodec, fingerprint: string, values: readonly SortValue[]): string {
  return cursors.seal(USAGE_CURSOR, JSON.stringify({ q: fingerprint, v: values }));
}

/** The sort values of a cursor issued for this query (its fingerprint); 400 for any other. */
export function decodeUsageCursor(cursors: CursorCodec, cursor: string, fingerprint: string, length: number): SortValue[] {
  let decoded: unknown;
  try {
    decoded = JSON.parse(cursors.open(USAGE_CURSOR, cursor));
  } catch {
    throw invalidCursor();
  }
  const { q, v } = (decoded ?? {}) as { q?: unknown; v?: unknown };
  if (
    q !== fingerprint ||
    !Array.isArray(v) ||
    v.length !== length ||
    !v.every((x) => typeof x === 'string' || (typeof x === 'number' && Number.isSafeInteger(x)))
  ) {
    throw invalidCursor();
  }
  return v as SortValue[];
}
