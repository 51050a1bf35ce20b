import type { Kysely } from 'kysely';
import type { components, operations } from '../../generated/gateway';
import type { CatalogModel } from '../config/catalog';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { type Clock, systemClock, toIso } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { LATENCY_BUCKETS, latencyPercentiles } from './latency-histogram';
import { csvDocument } from './usage-csv';
import { dollars, marginUsd } from './upstream-cost';
import { DEFAULT_CREDITS_PER_USD } from '../pricing/catalog-prices';
import {
  bucketEndOf,
  decodeUsageCursor,
  encodeUsageCursor,
  monthStarts,
  parseGroupBy,
  parseMetadataFilter,
  parseRange,
  queryFingerprint,
  type SortValue,
  type UsageDimension,
} from './usage-query';
import {
  type UsageOrder,
  type UsageSelection,
  type UsageTotalsRow,
  modelHasUsage,
  sortOf,
  usageDetails,
  usageTotals,
  withAnalyticsMemory,
} from './usage.repository';

type Schemas = components['schemas'];
export type UsageReport = Schemas['UsageReport'];
export type UsageReportRow = Schemas['UsageReportRow'];
export type UsageReportQuery = NonNullable<operations['getUsageReport']['parameters']['query']>;

const DEFAULT_LIMIT = 100;

/** A dimension's name in a row and in CSV. */
function dimensionName(dimension: UsageDimension): string {
  switch (dimension.kind) {
    case 'key':
      return 'key_id';
    case 'channel':
      return 'channel_id';
    case 'project':
      return 'project_id';
    case 'metadata':
      return `metadata.${dimension.name}`;
    default:
      return dimension.kind;
  }
}

/** GET /admin/usage: usage summed from the rollups written with each settlement (never raw generation rows). */
export class UsageReportService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly cursors: CursorCodec,
    /** The models in service: with the models that have usage, what the `model` filter may name. */
    private readonly catalog: ReadonlyMap<string, CatalogModel>,
    /** Where a range left out ends (the current hour). */
    private readonly clock: Clock = systemClock,
    /** CREDITS_PER_USD: how a margin turns credits charged into dollars. */
    private readonly creditsPerUsd: number = DEFAULT_CREDITS_PER_USD,
  ) {}

  async report(query: UsageReportQuery): Promise<UsageReport> {
    const selection = selectionOf(query, this.clock.now());
    if (query.model !== undefined) await this.checkModel(query.model);
    return withAnalyticsMemory(this.db, selection, (db) => this.reportFrom(db, selection, query));
  }

  private async reportFrom(db: Kysely<Database>, selection: UsageSelection, query: UsageReportQuery): Promise<UsageReport> {
    const { bucket, dimensions } = selection;
    const order: UsageOrder = query.order ?? 'bucket';
    const limit = query.limit ?? DEFAULT_LIMIT;
    const { cursor: _cursor, limit: _limit, ...asked } = query;
    // The range as resolved: a cursor issued for a default range does not open once that range has moved on.
    const fingerprint = queryFingerprint({ ...asked, from: selection.range.from, to: selection.range.to });
    const sort = sortOf(selection, order);
    const position = query.cursor === undefined ? undefined : decodeUsageCursor(this.cursors, query.cursor, fingerprint, sort.length);
    const rows = await usageTotals(db, selection, order, limit, position);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor = rows.length > limit && last ? encodeUsageCursor(this.cursors, fingerprint, sortValuesOf(last, order)) : null;
    // Without any group the range is one row, zeros included.
    if (page.length === 0 && bucket === undefined && dimensions.length === 0) {
      return { data: [{ ...emptySums(), latency_ms: latencyPercentiles([]) }], next_cursor: null };
    }
    const details = await this.detailsOf(db, selection, page);
    return { data: page.map((row) => this.toRow(selection, row, details.get(groupKey(row.groups)))), next_cursor: nextCursor };
  }

  /**
   * A model filter names a model of the catalog or one with usage (a model since removed from the
   * catalog keeps its history): anything else is a mistake that would answer an empty page, so 400.
   */
  private async checkModel(model: string): Promise<void> {
    if (this.catalog.has(model) || (await modelHasUsage(this.db, model))) return;
    const known = [...this.catalog.keys()].join(', ');
    throw new ApiError('invalid_request', `model: ${model} is not a model of the catalog (${known}) and has no usage.`, { param: 'model' });
  }

  /** The page's failures by code and latency histograms, by group. */
  private async detailsOf(
    db: Kysely<Database>,
    selection: UsageSelection,
    page: UsageTotalsRow[],
  ): Promise<Map<string, { failures: Record<string, number>; latency: number[] }>> {
    const byGroup = new Map<string, { failures: Record<string, number>; latency: number[] }>();
    if (page.length === 0) return byGroup;
    const columns = page[0]?.groups.length ?? 0;
    const values = Array.from({ length: columns }, (_, i) => [...new Set(page.map((row) => row.groups[i] as SortValue))]);
    let range = selection.range;
    if (selection.bucket !== undefined) {
      const starts = values[0] as number[];
      range = { from: Math.max(range.from, Math.min(...starts)), to: Math.min(range.to, bucketEndOf(Math.max(...starts), selection.bucket)) };
    }
    const wanted = new Set(page.map((row) => groupKey(row.groups)));
    for (const detail of await usageDetails(db, selection, { range, values })) {
      const key = groupKey(detail.groups);
      if (!wanted.has(key)) continue;
      const entry = byGroup.get(key) ?? { failures: {}, latency: new Array<number>(LATENCY_BUCKETS).fill(0) };
      // Failures by code: failed and canceled generations (upstream moderation included); the gateway's blocks are counted apart.
      if ((detail.status === 'failed' || detail.status === 'canceled') && detail.requests > 0) {
        const code = detail.errorCode === '' ? detail.status : detail.errorCode;
        entry.failures[code] = (entry.failures[code] ?? 0) + detail.requests;
      }
      detail.latency.forEach((count, bucket) => (entry.latency[bucket] = (entry.latency[bucket] as number) + count));
      byGroup.set(key, entry);
    }
    return byGroup;
  }

  private toRow(selection: UsageSelection, row: UsageTotalsRow, detail: { failures: Record<string, number>; latency: number[] } | undefined): UsageReportRow {
    const out: UsageReportRow = {
      requests: row.requests,
      succeeded: row.succeeded,
      failed: row.failed,
      canceled: row.canceled,
      blocked: row.blocked,
      images_delivered: row.images,
      credits_charged: row.credits,
      upstream_cost_usd: row.upstreamCostUsd === null ? null : Math.max(0, dollars(row.upstreamCostUsd)),
      margin_usd: marginUsd(row.costedCredits, row.upstreamCostUsd, this.creditsPerUsd),
      failures: detail?.failures ?? {},
      latency_ms: latencyPercentiles(detail?.latency ?? []),
    };
    let i = 0;
    if (selection.bucket !== undefined) out.bucket_start = toIso(row.groups[i++] as number);
    for (const dimension of selection.dimensions) {
      const value = String(row.groups[i++]);
      if (dimension.kind === 'key') out.key_id = value;
      else if (dimension.kind === 'owner') out.owner = value === '' ? null : value;
      else if (dimension.kind === 'project') out.project_id = value === '' ? null : value;
      else if (dimension.kind === 'model') out.model = value;
      else if (dimension.kind === 'provider') out.provider = value;
      else if (dimension.kind === 'channel') out.channel_id = value === '' ? null : value;
      else out.metadata = { ...out.metadata, [dimension.name]: value === '' ? null : value };
    }
    return out;
  }

  /** The page as RFC 4180 CSV: the grouped dimensions, then the sums. */
  toCsv(report: UsageReport, query: UsageReportQuery): string {
    const dimensions = parseGroupBy(query.group_by);
    const header = [
      ...(query.bucket === undefined ? [] : ['bucket_start']),
      ...dimensions.map(dimensionName),
      'requests',
      'succeeded',
      'failed',
      'canceled',
      'blocked',
      'images_delivered',
      'credits_charged',
      'upstream_cost_usd',
      'margin_usd',
      'latency_p50_ms',
      'latency_p95_ms',
      'latency_p99_ms',
      'failures',
    ];
    const rows = report.data.map((row) => [
      ...(query.bucket === undefined ? [] : [row.bucket_start ?? null]),
      ...dimensions.map((dimension) => dimensionValue(row, dimension)),
      row.requests,
      row.succeeded,
      row.failed,
      row.canceled,
      row.blocked,
      row.images_delivered,
      row.credits_charged,
      row.upstream_cost_usd,
      row.margin_usd,
      row.latency_ms.p50,
      row.latency_ms.p95,
      row.latency_ms.p99,
      Object.entries(row.failures)
        .map(([code, count]) => `${code}=${count}`)
        .join(';'),
    ]);
    return csvDocument(header, rows);
  }
}

/** The parameters as a selection of rollups; 400 for a bad range, group_by or metadata filter. */
function selectionOf(query: UsageReportQuery, now: number): UsageSelection {
  const bucket = query.bucket;
  const range = parseRange(query.from, query.to, bucket, now);
  return {
    range,
    bucket,
    months: bucket === 'month' ? monthStarts(range) : [],
    dimensions: parseGroupBy(query.group_by),
    filters: {
      keyId: query.key_id,
      owner: query.owner,
      projectId: query.project_id,
      model: query.model,
      provider: query.provider,
      channelId: query.channel_id,
      metadata: parseMetadataFilter(query.metadata),
    },
  };
}

function dimensionValue(row: UsageReportRow, dimension: UsageDimension): string | null {
  switch (dimension.kind) {
    case 'key':
      return row.key_id ?? null;
    case 'owner':
      return row.owner ?? null;
    case 'project':
      return row.project_id ?? null;
    case 'model':
      return row.model ?? null;
    case 'provider':
      return row.provider ?? null;
    case 'channel':
      return row.channel_id ?? null;
    case 'metadata':
      return row.metadata?.[dimension.name] ?? null;
  }
}

function emptySums(): Omit<UsageReportRow, 'latency_ms'> {
  return {
    requests: 0,
    succeeded: 0,
    failed: 0,
    canceled: 0,
    blocked: 0,
    images_delivered: 0,
    credits_charged: 0,
    upstream_cost_usd: null,
    margin_usd: null,
    failures: {},
  };
}

function groupKey(groups: readonly SortValue[]): string {
  return JSON.stringify(groups);
}

/** The cursor's position: the order's measure if any, then the grouped values (as sortOf orders them). */
function sortValuesOf(row: UsageTotalsRow, order: UsageOrder): SortValue[] {
  const measure = order === 'credits_desc' ? row.credits : order === 'requests_desc' ? row.requests : order === 'images_desc' ? row.images : undefined;
  return measure === undefined ? row.groups : [measure, ...row.groups];
}
