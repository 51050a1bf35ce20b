import { CompiledQuery, type Kysely, PostgresAdapter, sql } from 'kysely';
import { preparedQuery } from '../db/prepared-query';
import type { Database, GenerationAttemptsTable, GenerationsTable } from '../db/schema';
import { ATTEMPT_COLUMNS, insertAttempts } from '../channels/channels.repository';
import type { Reservation } from '../keys/keys.repository';
import { postgresText } from '../db/sql-text';
import { keyRowColumns } from '../keys/rules/sql-value';
import { keyUsableSql } from '../keys/rules/key-usability';
import { periodStartNowSql, storedPeriodEndedSql, usedNowSql } from '../keys/rules/quota-period';
import { crossesNoThresholdSql } from '../keys/rules/quota-thresholds';
import { releaseCredits } from '../keys/keys.repository';
import { addSettledGenerationUsage, latencyBucketParameter, rollupChannelOf, settledUsageCtes, subtractRefundedUsage } from '../usage/usage-rollups.repository';

/**
 * Rows of the partial index generations_active_idx. Every query of the workers and the sweeper
 * carries this term, written out rather than bound: SQLite uses a partial index only when the
 * query's WHERE repeats the index's own term with the same literals (it does not look into bound
 * parameters); without it each poll scanned every generation ever made (`SCAN generations`).
 */
export const ACTIVE_ROWS = sql<boolean>`status IN ('queued', 'running')`;

type Db = Kysely<Database>;

const GENERATION_COLUMNS = [
  'id',
  'key_id',
  'client_id',
  'model',
  'provider',
  'images',
  'credits',
  'status',
  'error_code',
  'latency_ms',
  'period_started_at',
  'created_at',
  'completed_at',
  'usage_epoch',
  'request',
  'lease_owner',
  'lease_expires_at',
  'started_at',
  'cancel_requested',
  'error_message',
  'runs',
] as const satisfies ReadonlyArray<keyof GenerationsTable>;

const insertGenerationQuery = preparedQuery<GenerationsTable & Record<string, unknown>, never>([...GENERATION_COLUMNS], (db, p) =>
  db.insertInto('generations').values(p),
);

/** All SQL on generations: one usage row per generation (prepared: every generation runs these). */
export async function insertGeneration(db: Db, row: GenerationsTable): Promise<void> {
  await insertGenerationQuery(db, row as GenerationsTable & Record<string, unknown>);
}

/** Statuses of a generation not settled yet: its credits are reserved. */
export const ACTIVE_STATUSES = ['queued', 'running'] as const;

const completeGenerationQuery = preparedQuery<
  { id: string; status: string; errorCode: string | null; errorMessage: string | null; latencyMs: number | null; completedAt: number },
  never
>(['id', 'status', 'errorCode', 'errorMessage', 'latencyMs', 'completedAt'], (db, p) =>
  db
    .updateTable('generations')
    .set({ status: p.status, error_code: p.errorCode, error_message: p.errorMessage, latency_ms: p.latencyMs, completed_at: p.completedAt, lease_owner: null, lease_expires_at: null })
    .where('id', '=', p.id)
    .where('status', 'in', ['queued', 'running']),
);

/**
 * Settles an active (queued or running) generation; false when it was no longer active (settled
 * elsewhere: canceled, abandoned by the sweeper, or finished by a worker that took it over), so
 * the caller must not release its credits again.
 */
export async function completeGeneration(
  db: Db,
  id: string,
  outcome: { status: 'succeeded' | 'failed' | 'canceled'; errorCode: string | null; errorMessage?: string | null; latencyMs: number | null; completedAt: number },
): Promise<boolean> {
  const result = await completeGenerationQuery(db, { id, ...outcome, errorMessage: outcome.errorMessage ?? null });
  const settled = Number(result.numAffectedRows ?? 0) === 1;
  if (settled) await addSettledGenerationUsage(db, id, outcome.status === 'succeeded' ? outcome.latencyMs : null);
  return settled;
}

/** The settlement statement on PostgreSQL, by number of attempt rows. */
const settleStatements = new Map<number, string>();

/** What the settlement statements' UPDATE returns: the usage rollups' inputs. */
const SETTLED_COLUMNS = 'id, key_id, model, provider, images, credits, completed_at';

function settleStatement(attempts: number): string {
  let text = settleStatements.get(attempts);
  if (text === undefined) {
    // The rollup's channel and latency bucket follow the attempt rows' parameters.
    const usage = 7 + attempts * ATTEMPT_COLUMNS.length;
    const rows = Array.from({ length: attempts }, (_, row) => `(${ATTEMPT_COLUMNS.map((_, column) => `$${7 + row * ATTEMPT_COLUMNS.length + column}`).join(', ')})`);
    text =
      (attempts > 0 ? `WITH a AS (INSERT INTO generation_attempts (${ATTEMPT_COLUMNS.join(', ')}) VALUES ${rows.join(', ')} ON CONFLICT (generation_id, seq) DO NOTHING), ` : 'WITH ') +
      `u AS (UPDATE generations SET status = $2, error_code = $3, error_message = $4, latency_ms = $5, completed_at = $6, lease_owner = NULL, lease_expires_at = NULL ` +
      `WHERE id = $1 AND status IN ('queued', 'running') RETURNING ${SETTLED_COLUMNS}), ` +
      `${settledUsageCtes({ settled: 'u', from: 'u', channel: `$${usage}::text`, latencyBucket: `$${usage + 1}::int` })} SELECT count(*)::int AS n FROM u`;
    settleStatements.set(attempts, text);
  }
  return text;
}

/**
 * completeGeneration() with the generation's attempt rows written in the same atomic step: on
 * PostgreSQL one statement (the attempts are inserted whether or not the row was still active:
 * they record calls that were made, whoever settled the generation), on SQLite two in the caller's transaction. Run it through `writes.single`.
 */
export async function settleGeneration(db: Db, id: string, outcome: Settlement['outcome'], attempts: readonly GenerationAttemptsTable[]): Promise<boolean> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) {
    await insertAttempts(db, [...attempts]);
    return completeGeneration(db, id, outcome);
  }
  const parameters: unknown[] = [id, outcome.status, outcome.errorCode, null, outcome.latencyMs, outcome.completedAt];
  for (const row of attempts) for (const column of ATTEMPT_COLUMNS) parameters.push(row[column]);
  parameters.push(rollupChannelOf(attempts), latencyBucketParameter(outcome.latencyMs));
  const result = await db.executeQuery<{ n: number }>(CompiledQuery.raw(settleStatement(attempts.length), parameters));
  return Number(result.rows[0]?.n ?? 0) === 1;
}

/** One settlement of settleGenerations(): what settleGeneration() takes. */
export interface Settlement {
  id: string;
  outcome: { status: 'succeeded'; errorCode: null; latencyMs: number | null; completedAt: number };
  attempts: readonly GenerationAttemptsTable[];
}

/** PostgreSQL types of the attempt columns, for unnest() of their arrays. */
const ATTEMPT_TYPES: Record<(typeof ATTEMPT_COLUMNS)[number], string> = {
  generation_id: 'text',
  seq: 'int',
  image_index: 'int',
  channel_id: 'text',
  outcome: 'text',
  error_code: 'text',
  latency_ms: 'int',
  started_at: 'bigint',
};
const SETTLE_MANY_STATEMENT =
  `WITH s AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $${5 + ATTEMPT_COLUMNS.length}::text[], $${6 + ATTEMPT_COLUMNS.length}::int[]) ` +
  `AS s(id, status, latency_ms, completed_at, channel_id, latency_bucket)), ` +
  `a AS (INSERT INTO generation_attempts (${ATTEMPT_COLUMNS.join(', ')}) SELECT * FROM unnest(${ATTEMPT_COLUMNS.map((column, i) => `$${5 + i}::${ATTEMPT_TYPES[column]}[]`).join(', ')}) ` +
  `ON CONFLICT (generation_id, seq) DO NOTHING), ` +
  // The rows locked in id order first, as lease renewals (an IN list on the primary key) lock them: the two never deadlock.
  `l AS (SELECT id FROM generations WHERE id IN (SELECT id FROM s) ORDER BY id FOR NO KEY UPDATE), ` +
  `u AS (UPDATE generations g SET status = s.status, error_code = NULL, error_message = NULL, latency_ms = s.latency_ms, completed_at = s.completed_at, ` +
  `lease_owner = NULL, lease_expires_at = NULL FROM s WHERE g.id = s.id AND g.id IN (SELECT id FROM l) AND g.status IN ('queued', 'running') ` +
  `RETURNING ${SETTLED_COLUMNS.split(', ').map((column) => `g.${column}`).join(', ')}), ` +
  `${settledUsageCtes({ settled: 'u', from: 'u JOIN s ON s.id = u.id', channel: 's.channel_id', latencyBucket: 's.latency_bucket' })} ` +
  `SELECT id FROM u`;

/**
 * settleGeneration() for several generations in ONE PostgreSQL statement (the request path's
 * settlements batched by StatementBatcher): each settles exactly as it would alone, since each
 * touches only its own generation row and attempt rows. Answers, in order, whether each was settled.
 */
export async function settleGenerations(db: Db, settlements: readonly Settlement[]): Promise<boolean[]> {
  const columns: unknown[][] = [[], [], [], []];
  const attemptColumns: unknown[][] = ATTEMPT_COLUMNS.map(() => []);
  const usageColumns: unknown[][] = [[], []];
  for (const { id, outcome, attempts } of settlements) {
    columns[0]!.push(id);
    columns[1]!.push(outcome.status);
    columns[2]!.push(outcome.latencyMs);
    columns[3]!.push(outcome.completedAt);
    for (const row of attempts) ATTEMPT_COLUMNS.forEach((column, i) => attemptColumns[i]!.push(row[column]));
    usageColumns[0]!.push(rollupChannelOf(attempts));
    usageColumns[1]!.push(latencyBucketParameter(outcome.latencyMs));
  }
  const result = await db.executeQuery<{ id: string }>(CompiledQuery.raw(SETTLE_MANY_STATEMENT, [...columns, ...attemptColumns, ...usageColumns]));
  const settled = new Set(result.rows.map((row) => row.id));
  return settlements.map((settlement) => settled.has(settlement.id));
}

/** The generation columns the reservation statement takes from the key row it updated; the others are parameters $6... */
const FROM_KEY_ROW = new Set<string>(['period_started_at', 'usage_epoch']);
const ROW_PARAMETERS = GENERATION_COLUMNS.filter((column) => !FROM_KEY_ROW.has(column));
/** Typed explicitly: the parameters of an INSERT ... SELECT would otherwise be resolved as text. */
const NUMERIC_COLUMNS = new Set<string>(['images', 'credits', 'latency_ms', 'created_at', 'completed_at', 'lease_expires_at', 'started_at', 'cancel_requested', 'runs']);
/** The key row's columns for the rules' SQL forms: qualified, since the batch form's UPDATE has a FROM. */
const KEY_ROW = keyRowColumns('api_keys');

/** Where the reservation statement finds its inputs: parameters ($n) for one reservation, columns of `r` for a batch. */
interface ReserveInputs {
  keyId: string;
  cost: string;
  now: string;
  /** numeric[] of the key's alert thresholds, sorted. */
  thresholds: string;
  keyHash: string;
  /** The generation's value of `column` (one not taken from the key row). */
  column: (column: string) => string;
  /** The batch's rows as a CTE, the UPDATE's FROM clause, and how the generation rows join the updated keys. */
  inputs?: string;
  /** A further condition on the key row. */
  where?: string;
  from?: string;
  join?: string;
}

/**
 * reserveCredits() and insertGeneration() as ONE PostgreSQL statement, for the reservations that
 * cross none of the key's alert thresholds ($4) and leave credits over: those write no event, so
 * nothing else belongs in their transaction. The UPDATE is reserveCredits()'s (same roll-over, same
 * conditional quota check, on the row as it is when the statement runs); the generation row takes
 * its period and book from the UPDATE's result, so both commit or neither does. No row: the caller
 * runs the general transaction (quota refused, a threshold crossed, the credits used up, or the key no
 * longer usable: disabled, expired or rotated, checked like reserveCredits() does).
 */
function reserveStatement(i: ReserveInputs): string {
  const now = sql.raw<number>(i.now);
  // The rules' SQL forms (src/keys/rules), on the key row the UPDATE changes.
  const usedBefore = usedNowSql(KEY_ROW, now);
  const ended = postgresText(storedPeriodEndedSql(KEY_ROW, now));
  const periodStart = postgresText(periodStartNowSql(KEY_ROW, now));
  const usable = postgresText(keyUsableSql(KEY_ROW, sql.raw(i.keyHash), now));
  const crossesNoThreshold = postgresText(
    crossesNoThresholdSql({ before: usedBefore, after: sql<number>`${usedBefore} + ${sql.raw(i.cost)}`, quota: sql.raw<number>('api_keys.credits_quota') }, sql.raw(i.thresholds)),
  );
  return (
    `WITH ${i.inputs ? `${i.inputs}, ` : ''}k AS (UPDATE api_keys SET ` +
    `credits_used = CASE WHEN ${ended} THEN ${i.cost} ELSE api_keys.credits_used + ${i.cost} END, ` +
    `period_started_at = ${periodStart}, ` +
    `usage_epoch = CASE WHEN ${ended} THEN api_keys.usage_epoch + 1 ELSE api_keys.usage_epoch END, ` +
    `last_used_at = ${i.now} ` +
    (i.from ? `FROM ${i.from} ` : '') +
    `WHERE api_keys.id = ${i.keyId} AND ${usable} AND ${postgresText(usedBefore)} + ${i.cost} < api_keys.credits_quota ` +
    (i.where ? `AND ${i.where} ` : '') +
    // No alert threshold crossed. A plain expression on the key row, not a subquery: when a concurrent reservation
    // commits first, PostgreSQL re-checks the WHERE on the new row version, and an anti-join over unnest() was not
    // re-checked there (threshold events went missing).
    `AND ${crossesNoThreshold} ` +
    `RETURNING api_keys.id, api_keys.credits_used, api_keys.credits_quota, api_keys.usage_epoch, api_keys.period_started_at), ` +
    `g AS (INSERT INTO generations (${GENERATION_COLUMNS.join(', ')}) SELECT ${GENERATION_COLUMNS.map((column) =>
      FROM_KEY_ROW.has(column) ? `k.${column}` : i.column(column),
    ).join(', ')} FROM k${i.join ? ` ${i.join}` : ''}) ` +
    `SELECT k.id AS key_id, k.credits_used, k.credits_quota, k.usage_epoch, k.period_started_at FROM k`
  );
}

const castOf = (column: string) => (NUMERIC_COLUMNS.has(column) ? 'bigint' : 'text');
const RESERVE_STATEMENT = reserveStatement({
  keyId: '$1',
  cost: '$2::bigint',
  now: '$3::bigint',
  thresholds: '$4::numeric[]',
  keyHash: '$5',
  column: (column) => `$${6 + ROW_PARAMETERS.indexOf(column as (typeof ROW_PARAMETERS)[number])}::${castOf(column)}`,
});

/** The batch form: the reservations' inputs and generation rows as arrays ($1... in BATCH_COLUMNS order), unnested into `r`. */
const BATCH_INPUTS = ['key_id', 'cost', 'now', 'thresholds', 'key_hash'] as const;
const BATCH_INPUT_TYPES: Record<(typeof BATCH_INPUTS)[number], string> = { key_id: 'text', cost: 'bigint', now: 'bigint', thresholds: 'text', key_hash: 'text' };
const RESERVE_MANY_STATEMENT = reserveStatement({
  keyId: 'r.key_id',
  cost: 'r.cost',
  now: 'r.now',
  // Thresholds differ in number per key, so they travel as text ('{50,80}'): unnest() of a numeric[][] needs equal lengths.
  thresholds: 'r.thresholds::numeric[]',
  keyHash: 'r.key_hash',
  column: (column) => `r.g_${column}`,
  from: 'r',
  join: 'JOIN r ON r.key_id = k.id',
  // The key rows are locked in id order first (whatever join the planner picks for the UPDATE), so batches of
  // other replicas, which lock theirs the same way, never deadlock with this one.
  where: 'api_keys.id IN (SELECT id FROM l)',
  inputs:
    `r AS (SELECT * FROM unnest(${[...BATCH_INPUTS.map((name) => BATCH_INPUT_TYPES[name]), ...ROW_PARAMETERS.map(castOf)].map((type, i) => `$${i + 1}::${type}[]`).join(', ')}) ` +
    `AS u(${[...BATCH_INPUTS, ...ROW_PARAMETERS.map((column) => `g_${column}`)].join(', ')})), ` +
    `l AS (SELECT id FROM api_keys WHERE id IN (SELECT key_id FROM r) ORDER BY id FOR NO KEY UPDATE)`,
});

/** Whether reserveWithGeneration() can run on this database (PostgreSQL). */
export function reservesInOneStatement(db: Db): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * The reservation and its generation row in one statement (PostgreSQL; see RESERVE_STATEMENT), or
 * undefined when this reservation needs the general path. `row`'s period_started_at and usage_epoch
 * are ignored: the statement takes them from the key row it updated.
 */
export async function reserveWithGeneration(
  db: Db,
  reservation: { keyId: string; keyHash: string; cost: number; now: number; alertThresholds: readonly number[] },
  row: GenerationsTable,
): Promise<Reservation | undefined> {
  const parameters: unknown[] = [reservation.keyId, reservation.cost, reservation.now, [...reservation.alertThresholds].sort((a, b) => a - b), reservation.keyHash];
  for (const column of ROW_PARAMETERS) parameters.push(row[column]);
  const result = await db.executeQuery<Reservation & { key_id: string }>(CompiledQuery.raw(RESERVE_STATEMENT, parameters));
  const [reserved] = result.rows;
  if (!reserved) return undefined;
  const { key_id: _keyId, ...book } = reserved;
  return book;
}

/** One reservation of reserveWithGenerations(): reserveWithGeneration()'s arguments. */
export interface ReservationRequest {
  reservation: { keyId: string; keyHash: string; cost: number; now: number; alertThresholds: readonly number[] };
  row: GenerationsTable;
}

/**
 * reserveWithGeneration() for several keys in ONE PostgreSQL statement (concurrent requests'
 * reservations, batched by StatementBatcher): each reservation is the same conditional UPDATE of its
 * own key row, so the keys must be distinct (one statement updates a row once). Answers, in order,
 * each reservation's book, or undefined where that one needs the general path.
 */
export async function reserveWithGenerations(db: Db, requests: readonly ReservationRequest[]): Promise<Array<Reservation | undefined>> {
  const columns: unknown[][] = [...BATCH_INPUTS, ...ROW_PARAMETERS].map(() => []);
  for (const { reservation, row } of requests) {
    const values = [
      reservation.keyId,
      reservation.cost,
      reservation.now,
      `{${[...reservation.alertThresholds].sort((a, b) => a - b).join(',')}}`,
      reservation.keyHash,
      ...ROW_PARAMETERS.map((column) => row[column]),
    ];
    values.forEach((value, i) => columns[i]!.push(value));
  }
  const result = await db.executeQuery<Reservation & { key_id: string }>(CompiledQuery.raw(RESERVE_MANY_STATEMENT, columns));
  const byKey = new Map(result.rows.map(({ key_id, ...reservation }) => [key_id, reservation]));
  return requests.map(({ reservation }) => byKey.get(reservation.keyId));
}

/** The key's generations waiting for a worker (the per-key cap of the asynchronous path). */
export async function countQueuedGenerations(db: Db, keyId: string): Promise<number> {
  const row = await db
    .selectFrom('generations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('key_id', '=', keyId)
    .where('status', '=', 'queued')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function findGeneration(db: Db, id: string): Promise<GenerationsTable | undefined> {
  return db.selectFrom('generations').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Running generations whose current run started before `before` (their provider deadline plus
 * grace ago): the process running it died or lost track of it, and no worker took it over in
 * time. Queued ones wait for a worker and are never swept. Rows from before durable generations
 * have no started_at: their age counts from creation.
 */
export async function findStalePendingGenerations(db: Db, provider: string, before: number, limit: number): Promise<GenerationsTable[]> {
  return db
    .selectFrom('generations')
    .selectAll()
    .where(ACTIVE_ROWS)
    .where('status', '=', 'running')
    .where('provider', '=', provider)
    .where((eb) => eb(eb.fn.coalesce('started_at', 'created_at'), '<', before))
    .limit(limit)
    .execute();
}

/**
 * Fails (or cancels) an active generation and gives its credits back to the book they were charged to, in one
 * transaction: the request's own failure path and the sweeper both come here, and whichever marks
 * the row first releases; the other changes nothing. False when the row was no longer pending.
 */
export async function failGeneration(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  outcome: {
    errorCode: string;
    errorMessage?: string | null;
    latencyMs: number | null;
    completedAt: number;
    status?: 'failed' | 'canceled';
    /** Credits the key keeps (a disconnect after upstream calls were sent: src/generation/charges.ts); the rest is released. */
    chargedCredits?: number;
    unbilled?: Unbilled;
  },
): Promise<boolean> {
  const failed = await completeGenerationQuery(trx, {
    id: generation.id,
    status: outcome.status ?? 'failed',
    errorCode: outcome.errorCode,
    errorMessage: outcome.errorMessage ?? null,
    latencyMs: outcome.latencyMs,
    completedAt: outcome.completedAt,
  });
  if (Number(failed.numAffectedRows ?? 0) !== 1) return false;
  await keepAndRelease(trx, generation, outcome.chargedCredits ?? 0);
  if (outcome.unbilled) await recordUnbilled(trx, generation.id, outcome.unbilled);
  return true;
}

/** Images made upstream that no key paid for, and why (src/generation/charges.ts). */
export interface Unbilled {
  images: number;
  reason: string;
}

/** Records the operator's loss on an ended generation. */
export async function recordUnbilled(db: Db, id: string, unbilled: Unbilled): Promise<void> {
  await db.updateTable('generations').set({ unbilled_images: unbilled.images, unbilled_reason: unbilled.reason }).where('id', '=', id).execute();
}

/** The key keeps `charged` of the generation's reserved credits; the rest goes back to the book they were charged to. */
async function keepAndRelease(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  charged: number,
  errorMessage?: string,
): Promise<void> {
  if (charged > 0) {
    await trx
      .updateTable('generations')
      .set({ charged_credits: charged, ...(errorMessage !== undefined ? { error_message: errorMessage } : {}) })
      .where('id', '=', generation.id)
      .execute();
  }
  // Internal generations (no key) reserved nothing.
  if (generation.key_id !== null && generation.usage_epoch !== null && generation.credits > charged) {
    await releaseCredits(trx, generation.key_id, generation.credits - charged, generation.usage_epoch);
  }
  await addSettledGenerationUsage(trx, generation.id, null);
}

/**
 * Cancels an active generation in the caller's transaction, or answers undefined when it had already
 * ended. The conditional update decides against a finishing run, a sweeper or another cancel exactly
 * once; `charge` is then asked, with the status the row was canceled from (its row locked by the
 * update), how many credits the key keeps; the rest is released.
 */
export async function cancelGeneration(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  outcome: { errorMessage: (chargedCredits: number) => string; completedAt: number },
  charge: (from: 'queued' | 'running') => Promise<number>,
): Promise<{ chargedCredits: number } | undefined> {
  for (const from of ACTIVE_STATUSES) {
    const result = await trx
      .updateTable('generations')
      .set({
        status: 'canceled',
        error_code: 'canceled',
        error_message: outcome.errorMessage(0),
        latency_ms: null,
        completed_at: outcome.completedAt,
        lease_owner: null,
        lease_expires_at: null,
        cancel_requested: 1,
      })
      .where('id', '=', generation.id)
      .where('status', '=', from)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) continue;
    const chargedCredits = Math.min(await charge(from), generation.credits);
    await keepAndRelease(trx, generation, chargedCredits, outcome.errorMessage(chargedCredits));
    return { chargedCredits };
  }
  return undefined;
}

/**
 * A canceled synchronous run that learned of its cancel before sending all its calls: the cancel kept
 * every image's credits (the database cannot know what a synchronous run sent), so the run, which
 * knows, gives back the credits of the calls it never sent. Conditional, so it lowers the charge once.
 */
export async function refundUnsentCalls(
  trx: Db,
  generation: Pick<GenerationsTable, 'id' | 'key_id' | 'credits' | 'usage_epoch'>,
  sentCredits: number,
): Promise<number> {
  const row = await trx.selectFrom('generations').select('charged_credits').where('id', '=', generation.id).where('status', '=', 'canceled').executeTakeFirst();
  const charged = Number(row?.charged_credits ?? 0);
  if (charged <= sentCredits) return 0;
  const result = await trx
    .updateTable('generations')
    .set({ charged_credits: sentCredits })
    .where('id', '=', generation.id)
    .where('status', '=', 'canceled')
    .where('charged_credits', '=', charged)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return 0;
  if (generation.key_id !== null && generation.usage_epoch !== null) await releaseCredits(trx, generation.key_id, charged - sentCredits, generation.usage_epoch);
  await subtractRefundedUsage(trx, generation.id, charged - sentCredits);
  return charged - sentCredits;
}

export interface GenerationListQuery {
  keyId?: string;
  clientId?: string;
  model?: string;
  status?: string;
  createdAfter?: number;
  createdBefore?: number;
  limit: number;
  after?: { createdAt: number; id: string };
}

/** Newest first; one row more than `limit` tells the caller a next page exists. */
export async function listGenerations(db: Db, query: GenerationListQuery): Promise<GenerationsTable[]> {
  let q = db.selectFrom('generations').selectAll();
  if (query.keyId !== undefined) q = q.where('key_id', '=', query.keyId);
  if (query.clientId !== undefined) q = q.where('client_id', '=', query.clientId);
  if (query.model !== undefined) q = q.where('model', '=', query.model);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  if (query.createdAfter !== undefined) q = q.where('created_at', '>=', query.createdAfter);
  if (query.createdBefore !== undefined) q = q.where('created_at', '<', query.createdBefore);
  const after = query.after;
  if (after) {
    q = q.where((eb) => eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('id', '<', after.id)])]));
  }
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit + 1).execute();
}

export interface UsageAggregate {
  day_start: number;
  key_id: string | null;
  client_id: string | null;
  model: string;
  generations: number;
  images: number;
  credits: number;
}

/** Succeeded generations in [from, to), summed per UTC day, key or service, and model. */
export async function aggregateUsage(db: Db, range: { from: number; to: number; keyId?: string }): Promise<UsageAggregate[]> {
  // Integer arithmetic on epoch milliseconds gives the UTC day on both engines.
  const day = sql<number>`created_at - (created_at % 86400000)`;
  let q = db
    .selectFrom('generations')
    .select((eb) => [
      day.as('day_start'),
      'key_id',
      'client_id',
      'model',
      eb.fn.countAll<number>().as('generations'),
      eb.fn.sum<number>('images').as('images'),
      eb.fn.sum<number>('credits').as('credits'),
    ])
    .where('status', '=', 'succeeded')
    .where('created_at', '>=', range.from)
    .where('created_at', '<', range.to);
  if (range.keyId !== undefined) q = q.where('key_id', '=', range.keyId);
  const rows = await q.groupBy([day, 'key_id', 'client_id', 'model']).orderBy('day_start').orderBy('key_id').orderBy('model').execute();
  // PostgreSQL answers count/sum as strings.
  return rows.map((r) => ({ ...r, day_start: Number(r.day_start), generations: Number(r.generations), images: Number(r.images), credits: Number(r.credits) }));
}
