import fc from 'fast-check';
import { CompiledQuery, type RawBuilder, sql } from 'kysely';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { postgresText } from '../../src/db/sql-text';
import { type KeyStatus, keyRefusal, keyStatus, keyStatusIsSql, keyUsableSql } from '../../src/keys/rules/key-usability';
import {
  currentPeriodStart,
  currentPeriodStartSql,
  periodStartNowSql,
  storedPeriodEnded,
  storedPeriodEndedSql,
  usageNow,
  usedNowSql,
} from '../../src/keys/rules/quota-period';
import { crossesNoThresholdSql, thresholdsCrossed } from '../../src/keys/rules/quota-thresholds';
import { DAY_MS } from '../../src/shared/clock';
import { type ThrowawayDatabase, createThrowawayDatabase, testEngine } from '../helpers/test-database';

/**
 * Each business rule of src/keys/rules has a TypeScript form and a SQL form; here both are evaluated
 * on many generated inputs, the SQL on this project's real engine (SQLite, or PostgreSQL in the
 * postgres project), and must agree. Row values reach the SQL as typed columns (as a key row's do),
 * `now` and the request's values as bound parameters (as the repositories bind them); on PostgreSQL
 * the text form with `$n::bigint` that the one-statement reservation uses is checked too.
 */

const RUNS = 500;
const MAX_DAYS = 3650;
/** Epoch ms up to the year 2096, and credits up to the API's quota maximum. */
const MAX_TIME = 4e12;
const MAX_CREDITS = 1_000_000_000;

let throwaway: ThrowawayDatabase;
let database: GatewayDatabase;

beforeAll(async () => {
  throwaway = await createThrowawayDatabase(testEngine);
  database = openDatabase(throwaway.url);
});

afterAll(async () => {
  await database.close();
  await throwaway.drop();
});

/** A SQL column type and value of the generated row. */
type Column = { type: 'bigint' | 'integer' | 'text'; value: number | string | null };

/** A condition's answer as WHERE reads it: null is not true. */
function truth(value: unknown): boolean {
  return value === true || value === 1 || value === '1';
}

function asNumber(value: unknown): number {
  return Number(value);
}

/** The row as a one-row table named api_keys, its columns typed as in the schema. */
function rowTable(row: Record<string, Column>): RawBuilder<unknown> {
  const columns = Object.entries(row).map(([name, column]) => sql`CAST(${column.value} AS ${sql.raw(column.type)}) AS ${sql.ref(name)}`);
  return sql`(SELECT ${sql.join(columns)}) AS api_keys`;
}

/** Evaluates each named expression on the row. */
async function evaluate(row: Record<string, Column>, expressions: Record<string, RawBuilder<unknown>>): Promise<Record<string, unknown>> {
  const selected = Object.entries(expressions).map(([name, expression]) => sql`${expression} AS ${sql.ref(name)}`);
  const result = await sql<Record<string, unknown>>`SELECT ${sql.join(selected)} FROM ${rowTable(row)}`.execute(database.db);
  return result.rows[0] as Record<string, unknown>;
}

/**
 * PostgreSQL: the same, with the expressions as text (postgresText) and `now` as `$1::bigint`, as
 * the reservation statement of reservations.repository.ts writes them.
 */
async function evaluateText(
  row: Record<string, Column>,
  now: number,
  expressions: (now: RawBuilder<number>) => Record<string, RawBuilder<unknown>>,
): Promise<Record<string, unknown>> {
  const entries = Object.entries(row);
  const columns = entries.map(([name, column], i) => `CAST($${i + 2} AS ${column.type}) AS ${name}`).join(', ');
  const selected = Object.entries(expressions(sql.raw<number>('$1::bigint')))
    .map(([name, expression]) => `${postgresText(expression)} AS ${name}`)
    .join(', ');
  const text = `SELECT ${selected} FROM (SELECT ${columns}) AS api_keys`;
  const result = await database.db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, [now, ...entries.map(([, column]) => column.value)]));
  return result.rows[0] as Record<string, unknown>;
}

const COLUMNS = {
  createdAt: sql.ref<number>('api_keys.created_at'),
  periodDays: sql.ref<number>('api_keys.quota_period_days'),
  periodStartedAt: sql.ref<number>('api_keys.period_started_at'),
  creditsUsed: sql.ref<number>('api_keys.credits_used'),
  creditsQuota: sql.ref<number>('api_keys.credits_quota'),
  status: sql.ref<string>('api_keys.status'),
  expiresAt: sql.ref<number | null>('api_keys.expires_at'),
  keyHash: sql.ref<string>('api_keys.key_hash'),
};

describe('quota period roll-over: TypeScript and SQL agree', () => {
  // Rows as the gateway writes them: period_started_at on the grid of periods (created, set_quota,
  // roll-over); and anywhere near it, which the rule must handle alike in both forms too.
  const storedArb = fc
    .record({
      createdAt: fc.integer({ min: 0, max: MAX_TIME }),
      periodDays: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: MAX_DAYS })),
      periodIndex: fc.integer({ min: 0, max: 400 }),
      offGrid: fc.oneof(fc.constant(0), fc.integer({ min: -DAY_MS, max: DAY_MS })),
      creditsUsed: fc.integer({ min: 0, max: MAX_CREDITS }),
      // From before creation (a replica's clock behind) to long after; boundaries of periods made likely.
      nowPeriods: fc.integer({ min: -3, max: 500 }),
      nowWithin: fc.oneof(fc.constantFrom(0, -1, 1), fc.integer({ min: -DAY_MS, max: MAX_DAYS * DAY_MS })),
    })
    .map((r) => {
      const length = r.periodDays * DAY_MS;
      return {
        createdAt: r.createdAt,
        periodDays: r.periodDays,
        periodStartedAt: r.createdAt + r.periodIndex * length + r.offGrid,
        creditsUsed: r.creditsUsed,
        now: r.createdAt + r.nowPeriods * length + r.nowWithin,
      };
    });

  it(`on ${testEngine}`, async () => {
    await fc.assert(
      fc.asyncProperty(storedArb, async (s) => {
        const expected = {
          ended: storedPeriodEnded(s.periodStartedAt, s.periodDays, s.now),
          current_start: currentPeriodStart(s.createdAt, s.periodDays, s.now),
          used_now: usageNow(s, s.now).used,
          period_start_now: usageNow(s, s.now).periodStart,
        };
        const row: Record<string, Column> = {
          created_at: { type: 'bigint', value: s.createdAt },
          quota_period_days: { type: 'integer', value: s.periodDays },
          period_started_at: { type: 'bigint', value: s.periodStartedAt },
          credits_used: { type: 'bigint', value: s.creditsUsed },
        };
        const expressions = (now: number | RawBuilder<number>) => ({
          ended: storedPeriodEndedSql(COLUMNS, now),
          current_start: currentPeriodStartSql(COLUMNS, now),
          used_now: usedNowSql(COLUMNS, now),
          period_start_now: periodStartNowSql(COLUMNS, now),
        });
        const answers = [await evaluate(row, expressions(s.now))];
        if (testEngine === 'postgres') answers.push(await evaluateText(row, s.now, expressions));
        for (const answer of answers) {
          expect({
            ended: truth(answer.ended),
            current_start: asNumber(answer.current_start),
            used_now: asNumber(answer.used_now),
            period_start_now: asNumber(answer.period_start_now),
          }).toEqual(expected);
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe('key usability (disabled, expired, rotated): TypeScript and SQL agree', () => {
  const keyArb = fc.record({
    status: fc.constantFrom('active', 'disabled'),
    now: fc.integer({ min: 0, max: MAX_TIME }),
    expiresIn: fc.option(fc.oneof(fc.constantFrom(-1, 0, 1), fc.integer({ min: -MAX_DAYS * DAY_MS, max: MAX_DAYS * DAY_MS })), { nil: null }),
    storedHash: fc.constantFrom('hash_a', 'hash_b'),
    requestHash: fc.constantFrom('hash_a', 'hash_b'),
  });
  const STATUSES: KeyStatus[] = ['active', 'disabled', 'expired'];

  it(`on ${testEngine}`, async () => {
    await fc.assert(
      fc.asyncProperty(keyArb, async (k) => {
        const state = { status: k.status, expires_at: k.expiresIn === null ? null : k.now + k.expiresIn, key_hash: k.storedHash };
        const status = keyStatus(state, k.now);
        const expected = {
          usable: keyRefusal(state, k.requestHash, k.now) === undefined,
          ...Object.fromEntries(STATUSES.map((s) => [s, status === s])),
        };
        const row: Record<string, Column> = {
          status: { type: 'text', value: state.status },
          expires_at: { type: 'bigint', value: state.expires_at },
          key_hash: { type: 'text', value: state.key_hash },
        };
        const expressions = (now: number | RawBuilder<number>, requestHash: string | RawBuilder<string>) => ({
          usable: keyUsableSql(COLUMNS, requestHash, now),
          ...Object.fromEntries(STATUSES.map((s) => [s, keyStatusIsSql(s, COLUMNS, now)])),
        });
        const answers = [await evaluate(row, expressions(k.now, k.requestHash))];
        if (testEngine === 'postgres') answers.push(await evaluateText(row, k.now, (now) => expressions(now, sql.lit(k.requestHash))));
        for (const answer of answers) expect(Object.fromEntries(Object.entries(answer).map(([name, value]) => [name, truth(value)]))).toEqual(expected);
      }),
      { numRuns: RUNS },
    );
  });
});

// The threshold check's SQL form runs only in PostgreSQL's one-statement reservation (width_bucket, numeric[]).
(testEngine === 'postgres' ? describe : describe.skip)('alert thresholds crossed: TypeScript and SQL agree', () => {
  const thresholdsArb = fc.uniqueArray(fc.integer({ min: 1, max: 100 }), { maxLength: 10 }).map((t) => [...t].sort((a, b) => a - b));
  const stepArb = fc
    .record({
      quota: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: MAX_CREDITS }), fc.constantFrom(MAX_CREDITS, MAX_CREDITS - 1, 3, 7)),
      thresholds: thresholdsArb,
      // Usage before and after the step: anywhere, or just around a threshold's credit count, where rounding would show.
      anchor: fc.integer({ min: 1, max: 100 }),
      nearBefore: fc.boolean(),
      delta: fc.integer({ min: -2, max: 2 }),
      fraction: fc.double({ min: 0, max: 1, noNaN: true }),
      cost: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: MAX_CREDITS })),
    })
    .map((r) => {
      const near = Math.max(0, Math.floor((r.anchor * r.quota) / 100) + r.delta);
      const before = r.nearBefore ? near : Math.floor(r.fraction * r.quota);
      const cost = r.nearBefore ? Math.min(r.cost, r.quota + 1) : Math.max(0, near - before);
      return {
        quota: r.quota,
        before,
        after: before + cost,
        thresholds: r.nearBefore ? r.thresholds : [...new Set([...r.thresholds, r.anchor])].sort((a, b) => a - b),
      };
    });

  it('on postgres', async () => {
    await fc.assert(
      fc.asyncProperty(stepArb, async (s) => {
        const expected = s.quota > 0 && thresholdsCrossed(s, s.thresholds).length === 0;
        const row: Record<string, Column> = {
          credits_quota: { type: 'bigint', value: s.quota },
          credits_used: { type: 'bigint', value: s.before },
        };
        const step = (cost: number | RawBuilder<number>) => ({
          before: COLUMNS.creditsUsed,
          after: sql<number>`${COLUMNS.creditsUsed} + ${cost}`,
          quota: COLUMNS.creditsQuota,
        });
        const bound = await evaluate(row, { none: crossesNoThresholdSql(step(s.after - s.before), sql`CAST(${s.thresholds} AS numeric[])`) });
        // As the reservation statement writes it: cost as $n::bigint, the thresholds as $n::numeric[].
        const text = await evaluateText(row, s.after - s.before, (cost) => ({
          none: crossesNoThresholdSql(step(cost), sql.raw(`'{${s.thresholds.join(',')}}'::numeric[]`)),
        }));
        expect(truth(bound.none)).toBe(expected);
        expect(truth(text.none)).toBe(expected);
      }),
      { numRuns: RUNS },
    );
  });
});
