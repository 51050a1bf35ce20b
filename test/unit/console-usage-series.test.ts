import type { components } from '../../generated/gateway';
import { bucketEnd, bucketName, bucketStarts, bucketTick, groupOf, rangeOf, seriesOf, thinned } from '../../console/src/usage-series';

type Row = components['schemas']['UsageReportRow'];

const row = (bucket: string, model: string, credits: number, extra: Partial<Row> = {}): Row => ({
  bucket_start: bucket,
  model,
  requests: credits,
  succeeded: credits,
  failed: 0,
  canceled: 0,
  blocked: 0,
  images_delivered: credits,
  credits_charged: credits,
  upstream_cost_usd: null,
  margin_usd: null,
  failures: {},
  latency_ms: { p50: null, p95: null, p99: null },
  ...extra,
});

describe("the console's usage series (what its Usage chart plots from GET /admin/usage rows)", () => {
  it('rangeOf: whole UTC hours ending with the current hour, as the operation requires', () => {
    expect(rangeOf(24, Date.parse('2026-11-25T10:20:00Z'))).toEqual({ from: '2026-11-24T11:00:00.000Z', to: '2026-11-25T11:00:00.000Z' });
    expect(rangeOf(1, Date.parse('2026-11-25T10:00:00Z'))).toEqual({ from: '2026-11-25T09:00:00.000Z', to: '2026-11-25T10:00:00.000Z' });
  });

  it('seriesOf: one line per group over every bucket seen, a bucket without the group is 0, largest total first', () => {
    const rows = [
      row('2026-11-02T00:00:00.000Z', 'b', 5),
      row('2026-11-01T00:00:00.000Z', 'a', 1),
      row('2026-11-02T00:00:00.000Z', 'a', 2),
      row('2026-11-03T00:00:00.000Z', 'b', 4),
    ];
    expect(seriesOf(rows, 'model', 'credits_charged')).toEqual({
      times: [Date.parse('2026-11-01T00:00:00Z') / 1000, Date.parse('2026-11-02T00:00:00Z') / 1000, Date.parse('2026-11-03T00:00:00Z') / 1000],
      groups: [
        { name: 'b', values: [0, 5, 4], total: 9 },
        { name: 'a', values: [1, 2, 0], total: 3 },
      ],
    });
  });

  it('seriesOf keeps the largest groups only; groupOf names a missing dimension "(none)"', () => {
    const rows = ['a', 'b', 'c'].map((model, i) => row('2026-11-01T00:00:00.000Z', model, i + 1));
    expect(seriesOf(rows, 'model', 'requests', 2).groups.map((g) => g.name)).toEqual(['c', 'b']);
    expect(groupOf(row('2026-11-01T00:00:00.000Z', 'a', 1, { channel_id: null }), 'channel')).toBe('(none)');
    expect(groupOf(row('2026-11-01T00:00:00.000Z', 'a', 1, { owner: 'ops@example.com' }), 'owner')).toBe('ops@example.com');
    expect(groupOf(row('2026-11-01T00:00:00.000Z', 'a', 1, { project_id: 'prj_1' }), 'project')).toBe('prj_1');
    expect(groupOf(row('2026-11-01T00:00:00.000Z', 'a', 1, { project_id: null }), 'project')).toBe('(none)');
  });

  it('bucketStarts: every UTC hour, day or calendar month of the range, the first one holding its start', () => {
    const iso = (times: number[]) => times.map((time) => new Date(time).toISOString());
    expect(iso(bucketStarts('2026-11-25T22:00:00.000Z', '2026-11-26T01:00:00.000Z', 'hour'))).toEqual([
      '2026-11-25T22:00:00.000Z',
      '2026-11-25T23:00:00.000Z',
      '2026-11-26T00:00:00.000Z',
    ]);
    expect(iso(bucketStarts('2026-11-25T22:00:00.000Z', '2026-11-27T01:00:00.000Z', 'day'))).toEqual([
      '2026-11-25T00:00:00.000Z',
      '2026-11-26T00:00:00.000Z',
      '2026-11-27T00:00:00.000Z',
    ]);
    expect(iso(bucketStarts('2026-11-25T22:00:00.000Z', '2027-01-02T00:00:00.000Z', 'month'))).toEqual([
      '2026-11-01T00:00:00.000Z',
      '2026-12-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
  });

  it('seriesOf over given buckets: a bucket without usage reads 0 for every group', () => {
    const buckets = bucketStarts('2026-11-01T00:00:00.000Z', '2026-11-04T00:00:00.000Z', 'day');
    expect(seriesOf([row('2026-11-02T00:00:00.000Z', 'a', 3)], 'model', 'credits_charged', 8, buckets).groups).toEqual([
      { name: 'a', values: [0, 3, 0], total: 3 },
    ]);
  });

  it("the chart's time axis: a tick per bucket start (every n-th when they do not fit), named by its date for days, never by an hour", () => {
    const days = bucketStarts('2026-11-20T11:00:00.000Z', '2026-11-27T11:00:00.000Z', 'day');
    expect(days.map((day) => bucketTick(day, 'day', 'en-US'))).toEqual(['Nov 20', 'Nov 21', 'Nov 22', 'Nov 23', 'Nov 24', 'Nov 25', 'Nov 26', 'Nov 27']);
    expect(thinned(days, 8)).toEqual(days);
    expect(thinned(days, 3)).toEqual([days[0], days[3], days[6]]);
    expect(thinned(days, 3).every((tick) => new Date(tick).getUTCHours() === 0)).toBe(true);
    const hours = bucketStarts('2026-11-25T22:00:00.000Z', '2026-11-26T02:00:00.000Z', 'hour');
    expect(hours.map((hour) => bucketTick(hour, 'hour', 'en-US'))).toEqual(['22:00', '23:00', 'Nov 26', '01:00']);
    expect(bucketName(Date.parse('2026-11-25T14:00:00Z'), 'hour', 'en-US')).toBe('Nov 25, 14:00');
    expect(bucketName(Date.parse('2026-11-01T00:00:00Z'), 'month', 'en-US')).toBe('Nov 2026');
  });

  it('bucketEnd: where a bucket ends (its step is drawn flat up to there), calendar months included', () => {
    const iso = (time: number) => new Date(time).toISOString();
    expect(iso(bucketEnd(Date.parse('2026-11-25T23:00:00Z'), 'hour'))).toBe('2026-11-26T00:00:00.000Z');
    expect(iso(bucketEnd(Date.parse('2026-11-30T00:00:00Z'), 'day'))).toBe('2026-12-01T00:00:00.000Z');
    expect(iso(bucketEnd(Date.parse('2026-12-01T00:00:00Z'), 'month'))).toBe('2027-01-01T00:00:00.000Z');
  });
});
