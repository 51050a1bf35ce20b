import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../db/schema';
import { capabilitiesOf } from '../db/storage-capabilities';
import { LATENCY_COLUMNS } from './latency-histogram';
import { DAY_MS, type RangePiece, type RollupGrain, type SortValue, type UsageBucket, type UsageDimension, type UsageRange, coverRange } from './usage-query';

/**
 * The read side of usage analytics: sums over the rollup tables (never raw generation rows). A
 * range is read in pieces of mixed grains (coverRange: hours at its edges, whole days, whole
 * months), each from the table of its grain:
 * - a question about keys, owners, projects or metadata without model, provider or channel: usage_rollups
 *   (hours), usage_key_days (days) and, for the sums without day or hour buckets, usage_key_months
 *   (months; it has no error codes or histograms, so the page's detail reads days and hours);
 * - another about keys, owners, projects or metadata: usage_rollups alone;
 * - any other: usage_rollup_totals (hours) and usage_day_totals (days), whose sizes do not grow
 *   with the number of keys.
 * Keys' rows are joined to api_keys for owner, project and metadata, as they are now (the rollups
 * keep the key alone, so a key moved to another project takes its history with it). Grouped values
 * are '' where a row has none (no channel, no project, no such metadata).
 */
type Db = Kysely<Database>;

export interface UsageFilters {
  keyId?: string;
  owner?: string;
  projectId?: string;
  model?: string;
  provider?: string;
  channelId?: string;
  metadata?: { name: string; value: string };
}

export interface UsageSelection {
  range: UsageRange;
  bucket?: UsageBucket;
  /** Month starts covering the range (bucket = month). */
  months: readonly number[];
  dimensions: readonly UsageDimension[];
  filters: UsageFilters;
}

export type UsageOrder = 'bucket' | 'credits_desc' | 'requests_desc' | 'images_desc';

/** A group's sums from the ranking query; `groups` in the order bucket, then the dimensions. */
export interface UsageTotalsRow {
  groups: SortValue[];
  requests: number;
  succeeded: number;
  failed: number;
  canceled: number;
  /** Refused by the gateway's guardrails (status 'blocked'); counted in `requests` too. */
  blocked: number;
  images: number;
  credits: number;
  /** The upstream cost estimate in US dollars; null when no generation of the group had one. */
  upstreamCostUsd: number | null;
  /** The credits of the generations whose upstream cost is known. */
  costedCredits: number;
}

/** A group's outcome detail: requests by status and error code, and the latency histogram. */
export interface UsageDetailRow {
  groups: SortValue[];
  status: string;
  errorCode: string;
  requests: number;
  latency: number[];
}

const ORDER_MEASURE: Record<Exclude<UsageOrder, 'bucket'>, string> = { credits_desc: 'credits', requests_desc: 'requests', images_desc: 'images' };

/** A dimension of the key itself (the key's row), not of the generation's model, provider or channel. */
function isKeyDimension(dimension: UsageDimension): boolean {
  return dimension.kind === 'key' || dimension.kind === 'owner' || dimension.kind === 'project' || dimension.kind === 'metadata';
}

function readsKeys(selection: UsageSelection): boolean {
  const { filters } = selection;
  return (
    selection.dimensions.some(isKeyDimension) ||
    filters.keyId !== undefined ||
    filters.owner !== undefined ||
    filters.projectId !== undefined ||
    filters.metadata !== undefined
  );
}

/** The tables a selection reads, by grain (the finest always exists). */
interface RollupSource {
  tables: Partial<Record<RollupGrain, string>> & { hour: string };
}

const TIME_COLUMN: Record<RollupGrain, string> = { hour: 'hour_start', day: 'day_start', month: 'month_start' };

/**
 * The tables of a selection. `detail`: for the page's failures by code and histograms, which the
 * monthly rows do not keep.
 */
function sourceOf(selection: UsageSelection, detail: boolean): RollupSource {
  const { filters } = selection;
  if (!readsKeys(selection)) return { tables: { hour: 'usage_rollup_totals', day: 'usage_day_totals' } };
  const keyDimensionsOnly =
    selection.dimensions.every(isKeyDimension) && filters.model === undefined && filters.provider === undefined && filters.channelId === undefined;
  if (!keyDimensionsOnly) return { tables: { hour: 'usage_rollups' } };
  return { tables: { hour: 'usage_rollups', day: 'usage_key_days', ...(detail ? {} : { month: 'usage_key_months' }) } };
}

/** A range of a selection as pieces of the grains its tables and bucket allow. */
function piecesOf(selection: UsageSelection, source: RollupSource, range: UsageRange): RangePiece[] {
  const { bucket } = selection;
  const coarsest: RollupGrain =
    bucket === 'hour' || source.tables.day === undefined
      ? 'hour'
      : (bucket === undefined || bucket === 'month') && source.tables.month !== undefined
        ? 'month'
        : 'day';
  return coverRange(range, coarsest);
}

function joinsKeyRows(selection: UsageSelection): boolean {
  return (
    selection.dimensions.some((d) => d.kind === 'owner' || d.kind === 'project' || d.kind === 'metadata') ||
    selection.filters.owner !== undefined ||
    selection.filters.projectId !== undefined ||
    selection.filters.metadata !== undefined
  );
}

function bucketExpression(selection: UsageSelection, time: RawBuilder<number>): RawBuilder<number> | undefined {
  if (selection.bucket === 'hour') return sql<number>`${time}`;
  if (selection.bucket === 'day') return sql<number>`(${time} - ${time} % ${sql.lit(DAY_MS)})`;
  if (selection.bucket === 'month') {
    // Calendar months without engine date functions: the range's month starts, as a CASE ladder.
    const [first, ...rest] = selection.months;
    if (first === undefined) return undefined;
    if (rest.length === 0) return sql<number>`${sql.lit(first)}`;
    const steps = rest.map((start, i) => sql`WHEN ${time} < ${sql.lit(start)} THEN ${sql.lit(i === 0 ? first : (rest[i - 1] as number))}`);
    return sql<number>`(CASE ${sql.join(steps, sql` `)} ELSE ${sql.lit(rest[rest.length - 1] as number)} END)`;
  }
  return undefined;
}

function dimensionExpression(dimension: UsageDimension): RawBuilder<string> {
  switch (dimension.kind) {
    case 'key':
      return sql<string>`r.key_id`;
    case 'owner':
      return sql<string>`COALESCE(k.owner, '')`;
    case 'project':
      return sql<string>`COALESCE(k.project_id, '')`;
    case 'model':
      return sql<string>`r.model`;
    case 'provider':
      return sql<string>`r.provider`;
    case 'channel':
      return sql<string>`r.channel_id`;
    case 'metadata':
      return sql<string>`COALESCE(k.metadata ->> CAST(${dimension.name} AS text), '')`;
  }
}

/** The grouped expressions over a piece's rows `r` whose start is `time`, bucket first. */
function groupExpressions(selection: UsageSelection, time: RawBuilder<number> = sql<number>`r.hour_start`): RawBuilder<SortValue>[] {
  const bucket = bucketExpression(selection, time);
  return [...(bucket ? [bucket] : []), ...selection.dimensions.map(dimensionExpression)];
}

/**
 * A piece's measures, signed, as double precision: PostgreSQL sums bigints as numeric (arbitrary
 * precision, several times slower over millions of rows). Exact while every partial sum stays below
 * 2^53 (9e15), far above any count or credit total here. usage_key_months keeps the outcomes as columns.
 */
function pieceMeasures(grain: RollupGrain, sign: 1 | -1, detail: boolean): RawBuilder<unknown>[] {
  const signed = (expression: RawBuilder<unknown>, name: string) =>
    sql`${sql.raw(sign === 1 ? '' : '-')}CAST(${expression} AS double precision) AS ${sql.raw(name)}`;
  if (detail)
    return [sql`r.status`, sql`r.error_code`, signed(sql`r.requests`, 'requests'), ...LATENCY_COLUMNS.map((column) => sql`${sql.ref(`r.${column}`)}`)];
  const outcome = (status: string) => (grain === 'month' ? sql.ref(`r.${status}`) : sql`CASE WHEN r.status = ${sql.lit(status)} THEN r.requests ELSE 0 END`);
  return [
    signed(sql`r.requests`, 'requests'),
    signed(outcome('succeeded'), 'succeeded'),
    signed(outcome('failed'), 'failed'),
    signed(outcome('canceled'), 'canceled'),
    signed(outcome('blocked'), 'blocked'),
    signed(sql`r.images`, 'images'),
    signed(sql`r.credits`, 'credits'),
    signed(sql`r.upstream_cost_usd`, 'upstream_cost_usd'),
    signed(sql`r.costed_credits`, 'costed_credits'),
  ];
}

/**
 * The rollup rows in range and filters, with the grouped values as g0, g1, ... and the measures:
 * the sums' (requests, succeeded, failed, canceled, blocked, images, credits, upstream_cost_usd, costed_credits), or with `narrow` the detail's
 * (status, error_code, requests, lat_*), of every piece of the range.
 */
function filteredRows(selection: UsageSelection, narrow?: { range: UsageRange; values: SortValue[][] }): RawBuilder<unknown> {
  const detail = narrow !== undefined;
  const source = sourceOf(selection, detail);
  const pieces = piecesOf(selection, source, narrow?.range ?? selection.range);
  const { filters } = selection;
  const selects = pieces.map((piece) => {
    const time = sql.ref(`r.${TIME_COLUMN[piece.grain]}`) as RawBuilder<number>;
    const groups = groupExpressions(selection, time);
    const conditions: RawBuilder<unknown>[] = [sql`${time} >= ${piece.from}`, sql`${time} < ${piece.to}`];
    if (filters.keyId !== undefined) conditions.push(sql`r.key_id = ${filters.keyId}`);
    if (filters.model !== undefined) conditions.push(sql`r.model = ${filters.model}`);
    if (filters.provider !== undefined) conditions.push(sql`r.provider = ${filters.provider}`);
    if (filters.channelId !== undefined) conditions.push(sql`r.channel_id = ${filters.channelId}`);
    if (filters.owner !== undefined) conditions.push(sql`k.owner = ${filters.owner}`);
    if (filters.projectId !== undefined) conditions.push(sql`k.project_id = ${filters.projectId}`);
    if (filters.metadata !== undefined) conditions.push(sql`k.metadata ->> CAST(${filters.metadata.name} AS text) = ${filters.metadata.value}`);
    // A page's groups: each grouped value among the page's values (a superset the caller narrows).
    narrow?.values.forEach((values, i) => {
      const expression = groups[i] as RawBuilder<SortValue>;
      if (i === 0 && selection.bucket !== undefined) return;
      conditions.push(sql`${expression} IN (${sql.join(values.map((v) => sql`${v}`))})`);
    });
    const table = sql`${sql.table(source.tables[piece.grain] as string)} r`;
    const join = joinsKeyRows(selection) ? sql` JOIN api_keys k ON k.id = r.key_id` : sql``;
    const selected = groups.length === 0 ? [sql`0 AS g0`] : groups.map((expression, i) => sql`${expression} AS ${sql.raw(`g${i}`)}`);
    return sql`SELECT ${sql.join([...selected, ...pieceMeasures(piece.grain, piece.sign, detail)])} FROM ${table}${join} WHERE ${sql.join(conditions, sql` AND `)}`;
  });
  return sql.join(selects, sql` UNION ALL `);
}

function groupColumns(selection: UsageSelection): RawBuilder<unknown>[] {
  const count = Math.max(1, groupExpressions(selection).length);
  return Array.from({ length: count }, (_, i) => sql.raw(`g${i}`));
}

/** Rows after the cursor's position, for a sort whose columns each go up or down. */
function after(sort: ReadonlyArray<{ column: string; descending: boolean }>, position: readonly SortValue[]): RawBuilder<unknown> {
  const alternatives = sort.map((key, i) => {
    const equal = sort.slice(0, i).map((earlier, j) => sql`${sql.ref(`a.${earlier.column}`)} = ${position[j]}`);
    const beyond = sql`${sql.ref(`a.${key.column}`)} ${sql.raw(key.descending ? '<' : '>')} ${position[i]}`;
    return sql`(${sql.join([...equal, beyond], sql` AND `)})`;
  });
  return sql`(${sql.join(alternatives, sql` OR `)})`;
}

/** The sort of a query: the order's measure (largest first) if any, then the grouped values ascending. */
export function sortOf(selection: UsageSelection, order: UsageOrder): Array<{ column: string; descending: boolean }> {
  const groups = groupColumnsNames(selection).map((column) => ({ column, descending: false }));
  return order === 'bucket' ? groups : [{ column: ORDER_MEASURE[order], descending: true }, ...groups];
}

function groupColumnsNames(selection: UsageSelection): string[] {
  return Array.from({ length: groupExpressions(selection).length }, (_, i) => `g${i}`);
}

const num = (value: unknown) => Number(value ?? 0);

/** Memory for one analytics query's aggregation on PostgreSQL (a hash over every key of a range), so it does not spill to disk. */
const ANALYTICS_WORK_MEM = '64MB';

/**
 * Runs `read` with the memory its aggregations need: a question about keys on PostgreSQL runs in a
 * transaction with work_mem raised (SQLite needs nothing; the totals tables have few groups),
 * without JIT compilation (tens of milliseconds per query that a short aggregation never earns
 * back), and without parallel workers: the planner cannot estimate the groups of a range's pieces
 * (UNION ALL) and plans a parallel sort of every key's partial sums, measured about twice as slow
 * as one process's hash over them on 2 cores.
 */
export async function withAnalyticsMemory<T>(db: Db, selection: UsageSelection, read: (db: Db) => Promise<T>): Promise<T> {
  if (!capabilitiesOf(db).transactionSettings || !readsKeys(selection)) return read(db);
  return db.transaction().execute(async (trx) => {
    await sql`SELECT set_config('work_mem', ${ANALYTICS_WORK_MEM}, true), set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)`.execute(
      trx,
    );
    return read(trx);
  });
}

/** One page of groups with their sums, `limit + 1` rows (the extra one says a next page exists). */
export async function usageTotals(
  db: Db,
  selection: UsageSelection,
  order: UsageOrder,
  limit: number,
  position?: readonly SortValue[],
): Promise<UsageTotalsRow[]> {
  const groups = groupColumns(selection);
  const sort = sortOf(selection, order);
  // A group met only in the days a month piece takes off nets to zero: not a group of the range.
  const subtracts = piecesOf(selection, sourceOf(selection, false), selection.range).some((piece) => piece.sign === -1);
  const having = subtracts ? sql` HAVING sum(requests) <> 0 OR sum(credits) <> 0` : sql``;
  const totals = sql`SELECT ${sql.join(groups)}, sum(requests) AS requests, sum(succeeded) AS succeeded, sum(failed) AS failed,
      sum(canceled) AS canceled, sum(blocked) AS blocked, sum(images) AS images, sum(credits) AS credits,
      sum(upstream_cost_usd) AS upstream_cost_usd, sum(costed_credits) AS costed_credits
    FROM (${filteredRows(selection)}) x GROUP BY ${sql.join(groups)}${having}`;
  const where = position === undefined || sort.length === 0 ? sql`` : sql` WHERE ${after(sort, position)}`;
  const orderBy =
    sort.length === 0 ? sql`` : sql` ORDER BY ${sql.join(sort.map((key) => sql`${sql.ref(`a.${key.column}`)} ${sql.raw(key.descending ? 'DESC' : 'ASC')}`))}`;
  const result = await sql<Record<string, unknown>>`SELECT * FROM (${totals}) a${where}${orderBy} LIMIT ${limit + 1}`.execute(db);
  const names = groupColumnsNames(selection);
  return result.rows.map((row) => ({
    groups: names.map((name, i) => (i === 0 && selection.bucket !== undefined ? num(row[name]) : String(row[name]))),
    requests: num(row.requests),
    succeeded: num(row.succeeded),
    failed: num(row.failed),
    canceled: num(row.canceled),
    blocked: num(row.blocked),
    images: num(row.images),
    credits: num(row.credits),
    upstreamCostUsd: row.upstream_cost_usd === null || row.upstream_cost_usd === undefined ? null : Number(row.upstream_cost_usd),
    costedCredits: num(row.costed_credits),
  }));
}

/**
 * Outcome detail of a page's groups: rows per group, status and error code with the latency
 * histogram. `range` narrows time to the page's buckets; the rows may include groups not on the
 * page (each value is matched on its own), which the caller drops.
 */
export async function usageDetails(db: Db, selection: UsageSelection, page: { range: UsageRange; values: SortValue[][] }): Promise<UsageDetailRow[]> {
  const groups = groupColumns(selection);
  const latency = LATENCY_COLUMNS.map((column) => sql`sum(${sql.ref(column)}) AS ${sql.ref(column)}`);
  const result = await sql<Record<string, unknown>>`SELECT ${sql.join(groups)}, status, error_code, sum(requests) AS requests, ${sql.join(latency)}
    FROM (${filteredRows(selection, page)}) x GROUP BY ${sql.join(groups)}, status, error_code`.execute(db);
  const names = groupColumnsNames(selection);
  return result.rows.map((row) => ({
    groups: names.map((name, i) => (i === 0 && selection.bucket !== undefined ? num(row[name]) : String(row[name]))),
    status: String(row.status),
    errorCode: String(row.error_code),
    requests: num(row.requests),
    latency: LATENCY_COLUMNS.map((column) => num(row[column])),
  }));
}

/** Whether any settlement of `model` was rolled up: a model taken out of the catalog keeps its history. */
export async function modelHasUsage(db: Db, model: string): Promise<boolean> {
  return (await db.selectFrom('usage_day_totals').select('model').where('model', '=', model).limit(1).executeTakeFirst()) !== undefined;
}
