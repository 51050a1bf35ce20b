import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Session } from '../session';
import { ErrorNote, Field, FilterBar, Select, Table, useAction, useForm, useLoad } from '../ui';
import {
  type Bucket,
  type Dimension,
  type Metric,
  type Series,
  type UsageRow,
  bucketEnd,
  bucketName,
  bucketStarts,
  bucketTick,
  groupOf,
  rangeOf,
  seriesOf,
  thinned,
  usageCsv,
  usageRows,
} from '../usage-data';

const COLOURS = ['#0b57a4', '#b3261e', '#1d6b34', '#8a4b00', '#6b2fa3', '#00707a', '#a3306b', '#4d5661'];
const RANGES: Array<[string, string]> = [
  ['24', 'Last 24 hours'],
  ['168', 'Last 7 days'],
  ['720', 'Last 30 days'],
  ['2160', 'Last 90 days'],
];
const METRICS: Array<[Metric, string]> = [
  ['credits_charged', 'Credits charged'],
  ['requests', 'Requests'],
  ['images_delivered', 'Images delivered'],
  ['failed', 'Failed requests'],
  ['blocked', 'Blocked requests'],
];
const DIMENSIONS: Array<[Dimension, string]> = [
  ['model', 'Model'],
  ['key', 'Key'],
  ['owner', 'Owner'],
  ['project', 'Project'],
  ['channel', 'Channel'],
  ['provider', 'Provider'],
];

/** Pixels a tick's label needs on the time axis. */
const TICK_ROOM = 72;
/** A bucket's value held flat across the bucket: no line between one bucket's total and the next's. */
const steps = uPlot.paths.stepped?.({ align: 1 });

/** One step line per group, a tick per bucket start (as many as fit), in UTC like the buckets. */
function Chart({ series, title, bucket }: { series: Series; title: string; bucket: Bucket }) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!host.current || series.times.length === 0) return;
    const starts = series.times;
    // The last bucket's end is a point too, so that its step is drawn across it.
    const end = bucketEnd(starts[starts.length - 1]! * 1000, bucket) / 1000;
    const width = Math.max(320, host.current.clientWidth);
    const ticks = thinned(starts, Math.floor(width / TICK_ROOM));
    const plot = new uPlot(
      {
        width,
        height: 280,
        series: [
          { label: 'Bucket (UTC)', value: (_plot, at) => (at === null ? '—' : bucketName(at * 1000, bucket)) },
          ...series.groups.map((group, i) => ({
            label: group.name,
            stroke: COLOURS[i % COLOURS.length],
            width: 2,
            points: { show: false },
            ...(steps ? { paths: steps } : {}),
          })),
        ],
        scales: {
          x: { time: true, range: [starts[0]!, end] },
          y: { range: (_plot, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        axes: [{ splits: () => ticks, values: (_plot, splits) => splits.map((at) => bucketTick(at * 1000, bucket)) }, { size: 60 }],
      },
      [[...starts, end], ...series.groups.map((group) => [...group.values, group.values[group.values.length - 1] ?? 0])],
      host.current,
    );
    return () => plot.destroy();
  }, [series, bucket]);
  return <div ref={host} class="chart" role="img" aria-label={title} />;
}

/** The chart's numbers as a table, one row per bucket (what the chart shows, for reading and for screen readers). */
function ChartNumbers({ series, title, bucket }: { series: Series; title: string; bucket: Bucket }) {
  const buckets = series.times.map((at, index) => ({ at, index }));
  return (
    <details class="chart-numbers">
      <summary>The chart's numbers per {bucket}</summary>
      <Table
        caption={title}
        columns={[`${bucket.charAt(0).toUpperCase()}${bucket.slice(1)} (UTC)`, ...series.groups.map((group) => group.name)]}
        rows={buckets}
      >
        {({ at, index }) => (
          <tr key={at}>
            <th scope="row">{bucketName(at * 1000, bucket)}</th>
            {series.groups.map((group) => (
              <td key={group.name}>{group.values[index]}</td>
            ))}
          </tr>
        )}
      </Table>
    </details>
  );
}

export function UsagePage(_props: { session: Session }) {
  const [form, set] = useForm({
    hours: '168',
    bucket: 'day' as Bucket,
    dimension: 'model' as Dimension,
    metric: 'credits_charged' as Metric,
    owner: '',
    project: '',
    model: '',
  });
  const [applied, setApplied] = useState(form);
  const [csvError, runCsv, exporting] = useAction();
  const query = () => ({
    ...rangeOf(Number(applied.hours)),
    bucket: applied.bucket,
    group_by: applied.dimension,
    ...(applied.owner ? { owner: applied.owner } : {}),
    ...(applied.project ? { project_id: applied.project.trim() } : {}),
    ...(applied.model ? { model: applied.model } : {}),
  });
  const rows = useLoad(async () => {
    const asked = query();
    return { asked, rows: await usageRows(asked) };
  }, [applied]);
  // The report shown is drawn as it was asked for, until the next one is in.
  const bucket = (rows.data?.asked.bucket ?? applied.bucket) as Bucket;
  const dimension = (rows.data?.asked.group_by ?? applied.dimension) as Dimension;
  const series = rows.data ? seriesOf(rows.data.rows, dimension, applied.metric, 8, bucketStarts(rows.data.asked.from, rows.data.asked.to, bucket)) : undefined;
  const totals = rows.data ? totalsOf(rows.data.rows, dimension) : [];
  const metricName = METRICS.find(([m]) => m === applied.metric)?.[1] ?? applied.metric;
  const dimensionName = DIMENSIONS.find(([d]) => d === dimension)?.[1] ?? dimension;
  const chartTitle = `${metricName} per ${bucket} by ${dimensionName.toLowerCase()}`;
  const exportCsv = () =>
    runCsv(async () => {
      const csv = await usageCsv(query());
      const link = document.createElement('a');
      link.href = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
      link.download = `usage-by-${applied.dimension}-${applied.bucket}.csv`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    });
  return (
    <>
      <FilterBar
        label="Usage report"
        submit="Show"
        onApply={() => setApplied(form)}
        after={
          <button type="button" class="secondary" onClick={exportCsv} disabled={exporting}>
            Export CSV
          </button>
        }
      >
        <Select label="Range" value={form.hours} options={RANGES} onChange={set('hours')} />
        <Select
          label="Bucket"
          value={form.bucket}
          options={[
            ['hour', 'Hour'],
            ['day', 'Day'],
            ['month', 'Month'],
          ]}
          onChange={(bucket) => set('bucket')(bucket as Bucket)}
        />
        <Select label="Group by" value={form.dimension} options={DIMENSIONS} onChange={(dimension) => set('dimension')(dimension as Dimension)} />
        <Select label="Metric" value={form.metric} options={METRICS} onChange={(metric) => set('metric')(metric as Metric)} />
        <Field label="Owner filter" value={form.owner} onInput={set('owner')} />
        <Field label="Project filter" value={form.project} onInput={set('project')} placeholder="prj_..." />
        <Field label="Model filter" value={form.model} onInput={set('model')} />
      </FilterBar>
      <ErrorNote message={rows.error ?? csvError} />
      {rows.data && rows.data.rows.length === 0 && <p>No usage in this range.</p>}
      {series && rows.data && rows.data.rows.length > 0 && (
        <>
          <Chart series={series} bucket={bucket} title={chartTitle} />
          <ChartNumbers series={series} bucket={bucket} title={chartTitle} />
        </>
      )}
      {rows.data && rows.data.rows.length > 0 && (
        <Table
          caption={`Totals by ${dimensionName.toLowerCase()}`}
          columns={[
            dimensionName,
            'Requests',
            'Succeeded',
            'Failed',
            'Canceled',
            'Blocked',
            'Images delivered',
            'Credits charged',
            'Upstream cost (USD, estimated)',
            'Margin (USD)',
          ]}
          rows={totals}
        >
          {(total) => (
            <tr key={total.name}>
              <th scope="row">{total.name}</th>
              <td>{total.requests}</td>
              <td>{total.succeeded}</td>
              <td>{total.failed}</td>
              <td>{total.canceled}</td>
              <td>{total.blocked}</td>
              <td>{total.images_delivered}</td>
              <td>{total.credits_charged}</td>
              <td>{usd(total.upstream_cost_usd)}</td>
              <td>{usd(total.margin_usd)}</td>
            </tr>
          )}
        </Table>
      )}
    </>
  );
}

/** Dollars to the hundredth of a cent; a dash when unknown (no request of the group ran on a model with a money price). */
function usd(value: number | null): string {
  if (value === null) return '—';
  const rounded = Number(Math.abs(value).toFixed(4));
  return `${value < 0 && rounded > 0 ? '−' : ''}$${rounded}`;
}

/** Adds two amounts that may be unknown: unknown only when both are. */
function plus(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : a + b;
}

interface Totals {
  name: string;
  requests: number;
  succeeded: number;
  failed: number;
  canceled: number;
  blocked: number;
  images_delivered: number;
  credits_charged: number;
  upstream_cost_usd: number | null;
  margin_usd: number | null;
}

/** The range's sums per group (what the chart's lines add up to); cost and margin add up like the rest. */
function totalsOf(rows: UsageRow[], dimension: Dimension) {
  const totals = new Map<string, Totals>();
  for (const row of rows) {
    const name = groupOf(row, dimension);
    const total: Totals = totals.get(name) ?? {
      name,
      requests: 0,
      succeeded: 0,
      failed: 0,
      canceled: 0,
      blocked: 0,
      images_delivered: 0,
      credits_charged: 0,
      upstream_cost_usd: null,
      margin_usd: null,
    };
    total.requests += row.requests;
    total.succeeded += row.succeeded;
    total.failed += row.failed;
    total.canceled += row.canceled;
    total.blocked += row.blocked;
    total.images_delivered += row.images_delivered;
    total.credits_charged += row.credits_charged;
    total.upstream_cost_usd = plus(total.upstream_cost_usd, row.upstream_cost_usd);
    total.margin_usd = plus(total.margin_usd, row.margin_usd);
    totals.set(name, total);
  }
  return [...totals.values()].sort((a, b) => b.credits_charged - a.credits_charged || a.name.localeCompare(b.name));
}

/** Each key's credits per day over the last 30 days, from one report for the Keys page. */
export function useKeySparklines(keyIds: string[]): Map<string, number[]> | undefined {
  const load = useLoad(async () => {
    const range = rangeOf(720);
    return { range, rows: keyIds.length === 0 ? [] : await usageRows({ ...range, bucket: 'day', group_by: 'key' }, 5) };
  }, [keyIds.join(',')]);
  if (!load.data) return undefined;
  const series = seriesOf(load.data.rows, 'key', 'credits_charged', Number.MAX_SAFE_INTEGER, bucketStarts(load.data.range.from, load.data.range.to, 'day'));
  return new Map(series.groups.map((group) => [group.name, group.values]));
}

/** A tiny line of a key's daily credits (SVG: nothing to load). */
export function Sparkline({ values, name }: { values: number[] | undefined; name: string }) {
  const total = (values ?? []).reduce((sum, v) => sum + v, 0);
  const label = `${name}: ${total} credits in the last 30 days`;
  if (!values || values.length < 2) return <span aria-label={label}>{total > 0 ? total : '—'}</span>;
  const max = Math.max(1, ...values);
  const points = values.map((v, i) => `${((i / (values.length - 1)) * 80).toFixed(1)},${(18 - (v / max) * 16).toFixed(1)}`).join(' ');
  return (
    <svg width="80" height="20" viewBox="0 0 80 20" role="img" aria-label={label}>
      <polyline points={points} fill="none" stroke="#0b57a4" stroke-width="1.5" />
    </svg>
  );
}
