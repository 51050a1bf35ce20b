import { CompiledQuery, type Kysely, PostgresAdapter } from 'kysely';
import type { Database } from '../db/schema';
import { LATENCY_BUCKETS, LATENCY_COLUMNS, latencyBucketOf } from './latency-histogram';

/**
 * The write side of usage analytics: every settlement of a client key's generation adds its hourly
 * rollup rows (usage_rollups per key, usage_rollup_totals without the key) in the settlement's own
 * transaction or statement, so the rollups hold exactly what the books were charged, and survive
 * whatever the books survive. Upserts add to the row (INSERT ... ON CONFLICT DO UPDATE), so
 * concurrent settlements of one hour never lose a count. Internal generations (no key) are left out.
 *
 * What a settled generation adds: one request of its status and error code ('' for none); a
 * success its images and credits and its latency to the histogram; a failure or cancel the credits
 * it kept (generations.charged_credits: what a cancel or disconnect charged for calls sent). The
 * channel is the one of its last recorded attempt ('' for cancels: their attempts may be written
 * after the cancel, and a later refund must land on the same row). The hour is completed_at's.
 */
type Db = Kysely<Database>;

const KEYED = ['hour_start', 'key_id', 'model', 'provider', 'channel_id', 'status', 'error_code'] as const;
const TOTALS = KEYED.filter((column) => column !== 'key_id');
const COUNTS = ['requests', 'images', 'credits'] as const;
const HOUR_MS = 3_600_000;

function onConflict(table: string, dimensions: readonly string[], measures: readonly string[]): string {
  return ` ON CONFLICT (${dimensions.join(', ')}) DO UPDATE SET ${measures.map((column) => `${column} = ${table}.${column} + excluded.${column}`).join(', ')}`;
}

/** A settled generation row's contribution, as SELECT expressions over `generations g`, in KEYED then COUNTS order. */
function generationSelect(refundParameter: string | undefined): string[] {
  return [
    `g.completed_at - g.completed_at % ${HOUR_MS}`,
    'g.key_id',
    'g.model',
    'g.provider',
    `CASE WHEN g.status = 'canceled' THEN '' ELSE COALESCE((SELECT a.channel_id FROM generation_attempts a WHERE a.generation_id = g.id ORDER BY a.seq DESC LIMIT 1), '') END`,
    'g.status',
    `COALESCE(g.error_code, '')`,
    refundParameter === undefined ? '1' : '0',
    refundParameter === undefined ? `CASE WHEN g.status = 'succeeded' THEN g.images ELSE 0 END` : '0',
    refundParameter === undefined ? `CASE WHEN g.status = 'succeeded' THEN g.credits ELSE g.charged_credits END` : `-CAST(${refundParameter} AS bigint)`,
  ];
}

const statements = new Map<string, string[]>();

/**
 * The statements adding one settled generation (or a refund) to both tables: one on PostgreSQL
 * (a CTE feeds both upserts), two on SQLite. `latency`: the histogram column to count it in.
 */
function rowStatements(postgres: boolean, latencyBucket: number | undefined, refund: boolean): string[] {
  const cacheKey = `${postgres}:${latencyBucket ?? '-'}:${refund}`;
  const cached = statements.get(cacheKey);
  if (cached) return cached;
  const latency = latencyBucket === undefined ? [] : [LATENCY_COLUMNS[latencyBucket] as string];
  const measures = [...COUNTS, ...latency];
  const p = (i: number) => (postgres ? `$${i}` : '?');
  const expressions = [...generationSelect(refund ? p(2) : undefined), ...latency.map(() => '1')];
  const where = `FROM generations g WHERE g.id = ${p(1)} AND g.key_id IS NOT NULL AND g.completed_at IS NOT NULL`;
  const keyedColumns = [...KEYED, ...measures];
  const totalColumns = [...TOTALS, ...measures];
  let built: string[];
  if (postgres) {
    const source = `src AS (SELECT ${expressions.map((expression, i) => `${expression} AS ${keyedColumns[i]}`).join(', ')} ${where})`;
    built = [
      `WITH ${source}, k AS (INSERT INTO usage_rollups (${keyedColumns.join(', ')}) SELECT ${keyedColumns.join(', ')} FROM src` +
        `${onConflict('usage_rollups', KEYED, measures)}) ` +
        `INSERT INTO usage_rollup_totals (${totalColumns.join(', ')}) SELECT ${totalColumns.join(', ')} FROM src${onConflict('usage_rollup_totals', TOTALS, measures)}`,
    ];
  } else {
    const totalsExpressions = expressions.filter((_, i) => keyedColumns[i] !== 'key_id');
    built = [
      `INSERT INTO usage_rollups (${keyedColumns.join(', ')}) SELECT ${expressions.join(', ')} ${where}${onConflict('usage_rollups', KEYED, measures)}`,
      `INSERT INTO usage_rollup_totals (${totalColumns.join(', ')}) SELECT ${totalsExpressions.join(', ')} ${where}${onConflict('usage_rollup_totals', TOTALS, measures)}`,
    ];
  }
  statements.set(cacheKey, built);
  return built;
}

/**
 * Adds a just-settled generation to the rollups, in the settlement's transaction `trx` (after its
 * row took its final status, error code and charged credits). `latencyMs`: a success's run
 * latency, counted in the histogram.
 */
export async function addSettledGenerationUsage(trx: Db, generationId: string, latencyMs: number | null): Promise<void> {
  const postgres = trx.getExecutor().adapter instanceof PostgresAdapter;
  const bucket = latencyMs === null ? undefined : latencyBucketOf(latencyMs);
  for (const text of rowStatements(postgres, bucket, false)) await trx.executeQuery(CompiledQuery.raw(text, [generationId]));
}

/** Takes a canceled generation's refund of unsent calls off the rollup row its cancel added (same hour and dimensions). */
export async function subtractRefundedUsage(trx: Db, generationId: string, refundedCredits: number): Promise<void> {
  if (refundedCredits <= 0) return;
  const postgres = trx.getExecutor().adapter instanceof PostgresAdapter;
  for (const text of rowStatements(postgres, undefined, true)) {
    // SQLite binds in the order of the text, where the refund comes before the id.
    await trx.executeQuery(CompiledQuery.raw(text, postgres ? [generationId, refundedCredits] : [refundedCredits, generationId]));
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
 * CTEs for PostgreSQL's one-statement settlements: both rollup upserts from the generations the
 * statement settled. `settled`: a CTE of the updated rows (RETURNING id, key_id, model, provider,
 * images, credits, completed_at), `from`: what to select from (it, or it joined to the batch's
 * inputs), `channel` and `latencyBucket`: expressions for each settled row. Rows are summed per
 * rollup row first: one statement may not update a row twice.
 */
export function settledUsageCtes(options: { settled: string; from: string; channel: string; latencyBucket: string }): string {
  const u = options.settled;
  const measures = [...COUNTS, ...LATENCY_COLUMNS];
  const sums = [
    'count(*)',
    `sum(${u}.images)`,
    `sum(${u}.credits)`,
    ...Array.from({ length: LATENCY_BUCKETS }, (_, bucket) => `sum(CASE WHEN ${options.latencyBucket} = ${bucket} THEN 1 ELSE 0 END)`),
  ];
  const hour = `${u}.completed_at - ${u}.completed_at % ${HOUR_MS}`;
  const keyed =
    `usage_k AS (INSERT INTO usage_rollups (${[...KEYED, ...measures].join(', ')}) ` +
    `SELECT ${hour}, ${u}.key_id, ${u}.model, ${u}.provider, ${options.channel}, 'succeeded', '', ${sums.join(', ')} FROM ${options.from} ` +
    `WHERE ${u}.key_id IS NOT NULL GROUP BY 1, 2, 3, 4, 5${onConflict('usage_rollups', KEYED, measures)})`;
  const totals =
    `usage_t AS (INSERT INTO usage_rollup_totals (${[...TOTALS, ...measures].join(', ')}) ` +
    `SELECT ${hour}, ${u}.model, ${u}.provider, ${options.channel}, 'succeeded', '', ${sums.join(', ')} FROM ${options.from} ` +
    `WHERE ${u}.key_id IS NOT NULL GROUP BY 1, 2, 3, 4${onConflict('usage_rollup_totals', TOTALS, measures)})`;
  return `${keyed}, ${totals}`;
}
