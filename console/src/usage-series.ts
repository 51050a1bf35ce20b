import type { components } from '../../generated/gateway';

// What the Usage page computes from GET /admin/usage rows, without the browser: test/unit/console-usage-series.test.ts.

export type UsageRow = components['schemas']['UsageReportRow'];
export type Dimension = 'model' | 'key' | 'owner' | 'project' | 'channel' | 'provider';
export type Metric = 'credits_charged' | 'requests' | 'images_delivered' | 'failed' | 'blocked';
export type Bucket = components['schemas']['UsageBucket'];

const HOUR_MS = 3_600_000;

/** `[from, to)` in whole UTC hours ending with the current hour, as GET /admin/usage requires. */
export function rangeOf(hours: number, now = Date.now()): { from: string; to: string } {
  const to = Math.ceil(now / HOUR_MS) * HOUR_MS;
  return { from: new Date(to - hours * HOUR_MS).toISOString(), to: new Date(to).toISOString() };
}

/** The group a row belongs to, as shown (null dimensions read "(none)"). */
export function groupOf(row: UsageRow, dimension: Dimension): string {
  const value = { model: row.model, key: row.key_id, owner: row.owner, project: row.project_id, channel: row.channel_id, provider: row.provider }[dimension];
  return value ?? '(none)';
}

/** Every bucket start (ms) of `[from, to)`: UTC hours, days or calendar months, the first one holding `from`. */
export function bucketStarts(from: string, to: string, bucket: Bucket): number[] {
  const end = Date.parse(to);
  const start = new Date(from);
  if (bucket !== 'hour') start.setUTCHours(0, 0, 0, 0);
  if (bucket === 'month') start.setUTCDate(1);
  const starts: number[] = [];
  for (let at = start.getTime(); at < end; at = bucketEnd(at, bucket)) starts.push(at);
  return starts;
}

/** Where the bucket starting at `start` (ms) ends: the next UTC hour, day or calendar month. */
export function bucketEnd(start: number, bucket: Bucket): number {
  const at = new Date(start);
  if (bucket === 'hour') at.setUTCHours(at.getUTCHours() + 1);
  else if (bucket === 'day') at.setUTCDate(at.getUTCDate() + 1);
  else at.setUTCMonth(at.getUTCMonth() + 1);
  return at.getTime();
}

const UTC = 'UTC';
const BUCKET_NAMES: Record<Bucket, Intl.DateTimeFormatOptions> = {
  hour: { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone: UTC },
  day: { month: 'short', day: 'numeric', timeZone: UTC },
  month: { month: 'short', year: 'numeric', timeZone: UTC },
};

/** A bucket as a reader names it, in UTC as the buckets are: "Nov 22, 14:00", "Nov 22", "Nov 2026". */
export function bucketName(start: number, bucket: Bucket, locale?: string): string {
  return new Intl.DateTimeFormat(locale, BUCKET_NAMES[bucket]).format(start);
}

/** A bucket's tick on the chart's time axis: as bucketName, but an hour past midnight is its time alone. */
export function bucketTick(start: number, bucket: Bucket, locale?: string): string {
  if (bucket !== 'hour' || new Date(start).getUTCHours() === 0) return bucketName(start, bucket === 'hour' ? 'day' : bucket, locale);
  return new Intl.DateTimeFormat(locale, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone: UTC }).format(start);
}

/** Every `step`-th of `starts`, `step` the least that leaves at most `room` of them (ticks that fit the axis). */
export function thinned(starts: number[], room: number): number[] {
  const step = Math.max(1, Math.ceil(starts.length / Math.max(1, room)));
  return starts.filter((_, index) => index % step === 0);
}

export interface Series {
  /** Bucket starts, unix seconds (uPlot's x axis). */
  times: number[];
  groups: Array<{ name: string; values: number[]; total: number }>;
}

/**
 * Rows into one series per group, largest total first, over `buckets` (bucket starts in ms; every
 * bucket of the range, so a bucket without usage reads 0) or else the buckets the rows have.
 */
export function seriesOf(rows: UsageRow[], dimension: Dimension, metric: Metric, maxGroups = 8, buckets?: number[]): Series {
  const seen = rows.map((row) => Date.parse(row.bucket_start ?? ''));
  const times = [...new Set([...(buckets ?? []), ...seen])].sort((a, b) => a - b);
  const index = new Map(times.map((time, i) => [time, i]));
  const byGroup = new Map<string, number[]>();
  for (const row of rows) {
    const name = groupOf(row, dimension);
    const values = byGroup.get(name) ?? new Array<number>(times.length).fill(0);
    values[index.get(Date.parse(row.bucket_start ?? ''))!]! += row[metric];
    byGroup.set(name, values);
  }
  const groups = [...byGroup.entries()]
    .map(([name, values]) => ({ name, values, total: values.reduce((sum, v) => sum + v, 0) }))
    .sort((a, b) => b.total - a.total || a.name.localeCompare(b.name))
    .slice(0, maxGroups);
  return { times: times.map((time) => time / 1000), groups };
}
