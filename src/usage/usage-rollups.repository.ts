import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { directRunOf } from '../db/sqlite-direct';
import { capabilitiesOf } from '../db/storage-capabilities';
import { LATENCY_COLUMNS, latencyBucketOf } from './latency-histogram';
import { bucketStartOf, DAY_MS, HOUR_MS, monthStartSql } from './usage-query';

/**
 * The write side of usage analytics: every settlement of a client key's generation adds to the
 * rollup tables (usage_rollups per hour and key, usage_rollup_totals per hour without the key,
 * usage_key_days per day and key, usage_day_totals per day without the key, usage_key_months per
 * month and key) in the settlement's own transaction or statement, so the rollups hold exactly what
 * the books were charged, survive whatever the books survive, and each coarser row is the sum of its
 * finer rows (what the read side's ranges of mixed grains rely on). Upserts add to the row (INSERT
 * ... ON CONFLICT DO UPDATE), so concurrent settlements never lose a count. Internal generations
 * (no key) are left out.
 *
 * What a settled generation adds: one request of its status and error code ('' for none); a
 * success its images and credits and its latency to the histogram; a failure or cancel the credits
 * it kept (generations.charged_credits: what a cancel or disconnect charged for calls sent). Each adds
 * its upstream cost estimate (generations.upstream_cost_usd, upstream-cost.ts) when known, and then
 * its credits to costed_credits too: a margin sets the credits of costed generations against their cost. The
 * channel is the one of its last recorded attempt ('' for cancels: their attempts may be written
 * after the cancel, and a later refund must land on the same row). The hour, day and month are completed_at's.
 *
 * A request the gateway's guardrails refused (400 prompt_blocked, before anything is reserved) has
 * no generation row: it adds one request of status 'blocked' and its error code, no images, credits
 * or latency, channel '', at the refusal's hour, day and month (usage_key_months: its `blocked`
 * count). Upstream moderation refusals (content_policy_violation, output_moderated) are failed
 * generations, rolled up as any failure.
 */
type Db = Kysely<Database>;

const COUNTS = ['requests', 'images', 'credits', 'upstream_cost_usd', 'costed_credits'] as const;
/** usage_key_months keeps the outcomes as counts instead of rows per status and error code. */
const OUTCOME_COUNTS = ['requests', 'succeeded', 'failed', 'canceled', 'images', 'credits', 'upstream_cost_usd', 'costed_credits'] as const;
/** Measures that stay NULL until a contribution has a value (an unknown upstream cost adds nothing, not 0). */
const NULLABLE_MEASURES: readonly string[] = [...LATENCY_COLUMNS, 'upstream_cost_usd'];

interface RollupTable {
  name: string;
  dimensions: readonly string[];
  /** Counts per status and error code row with the latency histogram, or the outcomes as counts. */
  measures: 'histogram' | 'outcomes';
}

/** In the one order every settlement writes them (concurrent settlements lock shared rows in one order). */
const TABLES: readonly RollupTable[] = [
  { name: 'usage_rollups', dimensions: ['hour_start', 'key_id', 'model', 'provider', 'channel_id', 'status', 'error_code'], measures: 'histogram' },
  { name: 'usage_rollup_totals', dimensions: ['hour_start', 'model', 'provider', 'channel_id', 'status', 'error_code'], measures: 'histogram' },
  { name: 'usage_key_days', dimensions: ['day_start', 'key_id', 'status', 'error_code'], measures: 'histogram' },
  { name: 'usage_day_totals', dimensions: ['day_start', 'model', 'provider', 'channel_id', 'status', 'error_code'], measures: 'histogram' },
  { name: 'usage_key_months', dimensions: ['month_start', 'key_id'], measures: 'outcomes' },
];

/** A table's measure columns, given the histogram columns a statement adds to. */
function measuresOf(table: RollupTable, latency: readonly string[]): string[] {
  return table.measures === 'outcomes' ? [...OUTCOME_COUNTS] : [...COUNTS, ...latency];
}

/** Adds the new row's measures to the stored one; histogram buckets stay NULL while empty. */
function onConflict(table: RollupTable, measures: readonly string[]): string {
  const add = (column: string) =>
    NULLABLE_MEASURES.includes(column)
      ? `${column} = CASE WHEN excluded.${column} IS NULL THEN ${table.name}.${column} ELSE COALESCE(${table.name}.${column}, 0) + excluded.${column} END`
      : `${column} = ${table.name}.${column} + excluded.${column}`;
  return ` ON CONFLICT (${table.dimensions.join(', ')}) DO UPDATE SET ${measures.map(add).join(', ')}`;
}

/** A settled generation row's contribution, by rollup column, as expressions over `generations g`. */
function generationExpressions(
  postgres: boolean,
  refundParameters: { credits: string; cost: string; costedCredits: string } | undefined,
): Record<string, string> {
  const refundParameter = refundParameters?.credits;
  const credits = `CASE WHEN g.status = 'succeeded' THEN g.credits ELSE g.charged_credits END`;
  const outcome = (status: string) => (refundParameter === undefined ? `CASE WHEN g.status = '${status}' THEN 1 ELSE 0 END` : '0');
  return {
    hour_start: `g.completed_at - g.completed_at % ${HOUR_MS}`,
    day_start: `g.completed_at - g.completed_at % ${DAY_MS}`,
    month_start: monthStartSql('g.completed_at', postgres),
    key_id: 'g.key_id',
    model: 'g.model',
    provider: 'g.provider',
    channel_id: `CASE WHEN g.status = 'canceled' THEN '' ELSE COALESCE((SELECT a.channel_id FROM generation_attempts a WHERE a.generation_id = g.id ORDER BY a.seq DESC LIMIT 1), '') END`,
    status: 'g.status',
    error_code: `COALESCE(g.error_code, '')`,
    requests: refundParameter === undefined ? '1' : '0',
    succeeded: outcome('succeeded'),
    failed: outcome('failed'),
    canceled: outcome('canceled'),
    images: refundParameter === undefined ? `CASE WHEN g.status = 'succeeded' THEN g.images ELSE 0 END` : '0',
    credits: refundParameters === undefined ? credits : `-CAST(${refundParameters.credits} AS bigint)`,
    upstream_cost_usd: refundParameters === undefined ? 'g.upstream_cost_usd' : `-CAST(${refundParameters.cost} AS double precision)`,
    costed_credits:
      refundParameters === undefined
        ? `CASE WHEN g.upstream_cost_usd IS NULL THEN 0 ELSE ${credits} END`
        : `-CAST(${refundParameters.costedCredits} AS bigint)`,
  };
}

/** What one event adds to every rollup table: each column's value as an SQL expression over the rows `from` selects. */
interface Contribution {
  expressions: Record<string, string>;
  /** What follows the SELECT list: the contributing rows (`FROM ... WHERE ...`). */
  from: string;
  /** The measure columns a table's upsert adds to (the others keep their defaults on insert). */
  measures: (table: RollupTable) => string[];
}

/**
 * The upserts of a contribution into every rollup table: `oneStatement` (the engine's
 * oneStatementWrites) one, a CTE feeding the upserts, else one per table.
 */
function upsertStatements(contribution: Contribution, oneStatement: boolean): string[] {
  const { expressions, from, measures } = contribution;
  const columnsOf = (table: RollupTable) => [...table.dimensions, ...measures(table)];
  if (oneStatement) {
    const source = `src AS (SELECT ${Object.entries(expressions)
      .map(([column, expression]) => `${expression} AS ${column}`)
      .join(', ')} ${from})`;
    const [last, ...others] = [...TABLES].reverse() as [RollupTable, ...RollupTable[]];
    const upsert = (table: RollupTable) =>
      `INSERT INTO ${table.name} (${columnsOf(table).join(', ')}) SELECT ${columnsOf(table).join(', ')} FROM src${onConflict(table, measures(table))}`;
    return [`WITH ${[source, ...others.reverse().map((table, i) => `u${i} AS (${upsert(table)})`)].join(', ')} ${upsert(last)}`];
  }
  return TABLES.map(
    (table) =>
      `INSERT INTO ${table.name} (${columnsOf(table).join(', ')}) SELECT ${columnsOf(table)
        .map((column) => expressions[column])
        .join(', ')} ${from}${onConflict(table, measures(table))}`,
  );
}

const statements = new Map<string, string[]>();

/**
 * The statements adding one settled generation (or a refund) to every rollup table.
 * `latencyBucket`: the histogram bucket to count it in.
 */
function rowStatements(oneStatement: boolean, latencyBucket: number | undefined, refund: boolean): string[] {
  // The one statement is written in PostgreSQL's SQL ($n parameters, its calendar functions), the per-table ones in SQLite's.
  const postgres = oneStatement;
  const cacheKey = `${oneStatement}:${latencyBucket ?? '-'}:${refund}`;
  const cached = statements.get(cacheKey);
  if (cached) return cached;
  const latency = latencyBucket === undefined ? [] : [LATENCY_COLUMNS[latencyBucket] as string];
  const p = (i: number) => (postgres ? `$${i}` : '?');
  const built = upsertStatements(
    {
      expressions: {
        ...generationExpressions(postgres, refund ? { credits: p(2), cost: p(3), costedCredits: p(4) } : undefined),
        ...Object.fromEntries(latency.map((column) => [column, '1'])),
      },
      from: `FROM generations g WHERE g.id = ${p(1)} AND g.key_id IS NOT NULL AND g.completed_at IS NOT NULL`,
      measures: (table) => measuresOf(table, latency),
    },
    oneStatement,
  );
  statements.set(cacheKey, built);
  return built;
}

/** A request the gateway's guardrails refused, by the key that asked and the catalog entry it was admitted for. */
export interface BlockedRequest {
  keyId: string;
  model: string;
  provider: string;
  /** The refusal's code (prompt_blocked). */
  errorCode: string;
  /** When it was refused, epoch milliseconds. */
  at: number;
}

/** The values a blocked request adds, passed as parameters (no generation row to select them from). */
const BLOCKED_COLUMNS = [
  'hour_start',
  'day_start',
  'month_start',
  'key_id',
  'model',
  'provider',
  'channel_id',
  'status',
  'error_code',
  'requests',
  'blocked',
] as const;
type BlockedColumn = (typeof BLOCKED_COLUMNS)[number];
const BLOCKED_COUNTS: ReadonlySet<BlockedColumn> = new Set(['hour_start', 'day_start', 'month_start', 'requests', 'blocked']);

function blockedValues(blocked: BlockedRequest): Record<BlockedColumn, string | number> {
  return {
    hour_start: blocked.at - (blocked.at % HOUR_MS),
    day_start: blocked.at - (blocked.at % DAY_MS),
    month_start: bucketStartOf(blocked.at, 'month'),
    key_id: blocked.keyId,
    model: blocked.model,
    provider: blocked.provider,
    channel_id: '',
    status: 'blocked',
    error_code: blocked.errorCode,
    requests: 1,
    blocked: 1,
  };
}

/** The upserts of a blocked request, each with the columns its parameters bind, in order. */
function blockedStatements(oneStatement: boolean): Array<{ text: string; parameters: readonly BlockedColumn[] }> {
  const measures = (table: RollupTable) => (table.measures === 'outcomes' ? ['requests', 'blocked'] : ['requests']);
  if (oneStatement) {
    // PostgreSQL: typed parameters, each bound once, read by every upsert from the source CTE.
    const expressions = Object.fromEntries(
      BLOCKED_COLUMNS.map((column, i) => [column, `CAST($${i + 1} AS ${BLOCKED_COUNTS.has(column) ? 'bigint' : 'text'})`]),
    );
    return upsertStatements({ expressions, from: '', measures }, true).map((text) => ({ text, parameters: BLOCKED_COLUMNS }));
  }
  // SQLite: one `?` per column of each table's upsert, bound in its column order. `WHERE true`: an
  // INSERT ... SELECT with an upsert clause needs a WHERE (SQLite reads ON as a join's otherwise).
  const expressions = Object.fromEntries(BLOCKED_COLUMNS.map((column) => [column, '?']));
  const texts = upsertStatements({ expressions, from: 'WHERE true', measures }, false);
  return TABLES.map((table, i) => ({
    text: texts[i] as string,
    parameters: [...table.dimensions, ...measures(table)] as BlockedColumn[],
  }));
}

const blockedStatementsByEngine = new Map<boolean, ReturnType<typeof blockedStatements>>();

/**
 * Adds a request the gateway's guardrails refused to the rollups: on PostgreSQL one statement, on
 * SQLite one per table (run it in the group commit's `writes.single`).
 */
export async function addBlockedRequestUsage(db: Db, blocked: BlockedRequest): Promise<void> {
  const { oneStatementWrites } = capabilitiesOf(db);
  let built = blockedStatementsByEngine.get(oneStatementWrites);
  if (!built) blockedStatementsByEngine.set(oneStatementWrites, (built = blockedStatements(oneStatementWrites)));
  const values = blockedValues(blocked);
  const direct = directRunOf(db);
  for (const { text, parameters: columns } of built) {
    const parameters = columns.map((column) => values[column]);
    if (!direct?.(db, text, parameters)) await db.executeQuery(CompiledQuery.raw(text, parameters));
  }
}

/**
 * Adds a just-settled generation to the rollups, in the settlement's transaction `trx` (after its
 * row took its final status, error code and charged credits). `latencyMs`: a success's run
 * latency, counted in the histogram.
 */
export async function addSettledGenerationUsage(trx: Db, generationId: string, latencyMs: number | null): Promise<void> {
  const { oneStatementWrites } = capabilitiesOf(trx);
  const bucket = latencyMs === null ? undefined : latencyBucketOf(latencyMs);
  const parameters = [generationId];
  // SQLite: on the group commit's live transaction at once (sqlite-direct.ts), without a compiled query and its id per statement.
  const direct = directRunOf(trx);
  for (const text of rowStatements(oneStatementWrites, bucket, false)) {
    if (!direct?.(trx, text, parameters)) await trx.executeQuery(CompiledQuery.raw(text, parameters));
  }
}

/**
 * Takes a canceled generation's refund of unsent calls off the rollup rows its cancel added (same
 * hour, day and dimensions): its credits, and `refundedCostUsd` of its upstream cost (null when the
 * cost is unknown: the rows' cost and costed credits stay as they are).
 */
export async function subtractRefundedUsage(trx: Db, generationId: string, refundedCredits: number, refundedCostUsd: number | null = null): Promise<void> {
  if (refundedCredits <= 0) return;
  const { oneStatementWrites } = capabilitiesOf(trx);
  const refund = [refundedCredits, refundedCostUsd, refundedCostUsd === null ? 0 : refundedCredits];
  for (const text of rowStatements(oneStatementWrites, undefined, true)) {
    // The per-table statements bind in the order of their text (`?`), where the refunds come before the id.
    await trx.executeQuery(CompiledQuery.raw(text, oneStatementWrites ? [generationId, ...refund] : [...refund, generationId]));
  }
}

/** The histogram bucket of a success's latency, as the PostgreSQL settlement statements pass it. */
export function latencyBucketParameter(latencyMs: number | null): number | null {
  return latencyMs === null ? null : latencyBucketOf(latencyMs);
}

/** The channel a success's rollup names: its last attempt's, '' without attempts. */
export function rollupChannelOf(attempts: ReadonlyArray<{ seq: number; channel_id: string }>): string {
  let last: { seq: number; channel_id: string } | undefined;
  for (const attempt of attempts) if (last === undefined || attempt.seq > last.seq) last = attempt;
  return last?.channel_id ?? '';
}

/**
 * CTEs for PostgreSQL's one-statement settlements: the rollup upserts from the generations the
 * statement settled. `settled`: a CTE of the updated rows (RETURNING id, key_id, model, provider,
 * images, credits, completed_at, upstream_cost_usd), `from`: what to select from (it, or it joined to the batch's
 * inputs), `channel` and `latencyBucket`: expressions for each settled row. Rows are summed per
 * rollup row first (one statement may not update a row twice), and written in key order. The tables
 * are written in one order everywhere (TABLES).
 */
export function settledUsageCtes(options: { settled: string; from: string; channel: string; latencyBucket: string }): string {
  const u = options.settled;
  const sum: Record<string, string> = {
    requests: 'count(*)',
    succeeded: 'count(*)',
    failed: '0',
    canceled: '0',
    images: `sum(${u}.images)`,
    credits: `sum(${u}.credits)`,
    upstream_cost_usd: `sum(${u}.upstream_cost_usd)`,
    costed_credits: `sum(CASE WHEN ${u}.upstream_cost_usd IS NULL THEN 0 ELSE ${u}.credits END)`,
    ...Object.fromEntries(LATENCY_COLUMNS.map((column, bucket) => [column, `sum(CASE WHEN ${options.latencyBucket} = ${bucket} THEN 1 END)`])),
  };
  const value: Record<string, string> = {
    hour_start: `${u}.completed_at - ${u}.completed_at % ${HOUR_MS}`,
    day_start: `${u}.completed_at - ${u}.completed_at % ${DAY_MS}`,
    month_start: monthStartSql(`${u}.completed_at`, true),
    key_id: `${u}.key_id`,
    model: `${u}.model`,
    provider: `${u}.provider`,
    channel_id: options.channel,
    status: `'succeeded'`,
    error_code: `''`,
  };
  return TABLES.map((table, i) => {
    const grouped = table.dimensions.filter((column) => column !== 'status' && column !== 'error_code');
    const measures = measuresOf(table, LATENCY_COLUMNS);
    return (
      `usage_${i} AS (INSERT INTO ${table.name} (${[...table.dimensions, ...measures].join(', ')}) ` +
      `SELECT ${[...table.dimensions.map((column) => value[column]), ...measures.map((column) => sum[column])].join(', ')} FROM ${options.from} ` +
      `WHERE ${u}.key_id IS NOT NULL GROUP BY ${grouped.map((column) => value[column]).join(', ')} ` +
      // In key order: concurrent settlement statements then lock shared rows (an hour's totals) in one order, never deadlocking.
      `ORDER BY ${grouped.map((column) => value[column]).join(', ')}${onConflict(table, measures)})`
    );
  }).join(', ');
}
