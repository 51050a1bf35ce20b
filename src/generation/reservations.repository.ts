import { CompiledQuery, type Kysely, sql } from 'kysely';
import type { Database, GenerationsTable } from '../db/schema';
import { postgresText } from '../db/sql-text';
import type { Reservation } from '../keys/keys.repository';
import { keyUsableSql } from '../keys/rules/key-usability';
import { periodStartNowSql, storedPeriodEndedSql, usedNowSql } from '../keys/rules/quota-period';
import { crossesNoThresholdSql } from '../keys/rules/quota-thresholds';
import { keyRowColumns } from '../keys/rules/sql-value';
import { GENERATION_COLUMNS } from './generations.repository';

/**
 * The reservation's SQL on PostgreSQL: a key's credits and its generation row in one statement, alone
 * or batched. The general path (SQLite, thresholds, refusals) is reserveCredits() + insertGeneration()
 * in one transaction (reservations.ts).
 */
type Db = Kysely<Database>;

/** The generation columns the reservation statement takes from the key row it updated; the others are parameters $6... */
const FROM_KEY_ROW = new Set<string>(['period_started_at', 'usage_epoch']);
const ROW_PARAMETERS = GENERATION_COLUMNS.filter((column) => !FROM_KEY_ROW.has(column));
/** Typed explicitly: the parameters of an INSERT ... SELECT would otherwise be resolved as text. */
const NUMERIC_COLUMNS = new Set<string>([
  'images',
  'credits',
  'latency_ms',
  'created_at',
  'completed_at',
  'lease_expires_at',
  'started_at',
  'cancel_requested',
  'runs',
]);
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
    crossesNoThresholdSql(
      { before: usedBefore, after: sql<number>`${usedBefore} + ${sql.raw(i.cost)}`, quota: sql.raw<number>('api_keys.credits_quota') },
      sql.raw(i.thresholds),
    ),
  );
  return (
    `WITH ${i.inputs ? `${i.inputs}, ` : ''}k AS (UPDATE api_keys SET ` +
    `credits_used = CASE WHEN ${ended} THEN ${i.cost} ELSE api_keys.credits_used + ${i.cost} END, ` +
    `period_started_at = ${periodStart}, ` +
    `usage_epoch = CASE WHEN ${ended} THEN api_keys.usage_epoch + 1 ELSE api_keys.usage_epoch END, ` +
    `last_used_at = ${i.now} ` +
    (i.from ? `FROM ${i.from} ` : '') +
    // A key in a project moves two books: the general path reserves both (reservations.ts), whatever a cached key said.
    `WHERE api_keys.id = ${i.keyId} AND api_keys.project_id IS NULL AND ${usable} AND ${postgresText(usedBefore)} + ${i.cost} < api_keys.credits_quota ` +
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
const BATCH_INPUT_TYPES: Record<(typeof BATCH_INPUTS)[number], string> = {
  key_id: 'text',
  cost: 'bigint',
  now: 'bigint',
  thresholds: 'text',
  key_hash: 'text',
};
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
  const parameters: unknown[] = [
    reservation.keyId,
    reservation.cost,
    reservation.now,
    [...reservation.alertThresholds].sort((a, b) => a - b),
    reservation.keyHash,
  ];
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
