import { PostgresAdapter, sql } from 'kysely';
import { BOOKS_CATALOG, UPSTREAM_REFUSAL } from '../helpers/books';
import { startArkGateway } from '../helpers/ark-gateway';
import { bearer } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway, localRequest } from '../helpers/test-gateway';
import type { components } from '../../generated/gateway';
import { bucketStartOf, monthStartSql } from '../../src/usage/usage-query';

const HOUR = 3_600_000;
const DAY = 86_400_000;

/** An answer's row without its latency percentiles: the reference adds rows up, and percentiles do not add. */
type Row = Omit<components['schemas']['UsageReportRow'], 'latency_ms'>;

const SUMS = ['requests', 'succeeded', 'failed', 'canceled', 'blocked', 'images_delivered', 'credits_charged'] as const;

/** Rows summed by the named fields (the reference: a finer question's rows added up). */
function sumBy(rows: Row[], fields: ReadonlyArray<keyof Row>): Map<string, Omit<Row, 'model'>> {
  const sums = new Map<string, Omit<Row, 'model'>>();
  for (const row of rows) {
    const group = JSON.stringify(fields.map((field) => row[field] ?? null));
    const entry = sums.get(group) ?? {
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
    for (const field of SUMS) entry[field] += row[field];
    for (const [code, count] of Object.entries(row.failures)) entry.failures[code] = (entry.failures[code] ?? 0) + count;
    sums.set(group, entry);
  }
  return sums;
}

/**
 * Issue #28 at scale: questions read a range in pieces of mixed grains (hours, days, months, a
 * month less its uncovered days), from the coarser tables written with each settlement. Whatever
 * the pieces, the answer equals the one summed from the hourly rows, on both engines.
 */
describe('usage rollups of every grain agree (usage_key_months, usage_day_totals)', () => {
  let t: TestGateway;
  const keys: Array<{ id: string; key: string }> = [];
  let firstHour = 0;

  beforeAll(async () => {
    ({ t } = await startArkGateway({ apiKey: 'ark-grains', env: { MODEL_CATALOG: JSON.stringify(BOOKS_CATALOG) } }));
    // Prompt rules: the requests they block are rolled up too (status 'blocked', usage_key_months.blocked).
    const prompt_rules = [{ kind: 'blocked_term', term: 'AcmeCola' }];
    keys.push(await t.createKey({ owner: 'ann@example.com', credits_quota: 1000, allowed_providers: ['local', 'jimeng'], prompt_rules }));
    keys.push(await t.createKey({ owner: 'ben@example.com', credits_quota: 1000, allowed_providers: ['local', 'jimeng'], prompt_rules }));
    firstHour = bucketStartOf(t.clock.now(), 'hour');
    // Settlements spread over hours, days and month ends: successes on two models, upstream refusals and blocked prompts.
    const steps = [0, 5 * HOUR, 4 * DAY, 9 * HOUR, 2 * DAY, 31 * DAY, 13 * HOUR, 40 * DAY];
    for (const [i, step] of steps.entries()) {
      t.clock.advanceMs(step);
      for (const [k, { key }] of keys.entries()) {
        const send = (body: Record<string, unknown>) => t.api.client(key, body);
        expect((await send(localRequest({ prompt: `step ${i}`, n: 1 + ((i + k) % 2) }))).status).toBe(200);
        if ((i + k) % 3 !== 0) expect((await send({ prompt: `ark ${i}`, model: 'held-3', response_format: 'b64_json' })).status).toBe(200);
        if ((i + k) % 2 === 0) expect((await send({ prompt: `refused ${i} ${UPSTREAM_REFUSAL}`, model: 'held-1' })).status).not.toBe(200);
        if ((i + k) % 3 === 1) expect((await send({ prompt: `acmecola ${i}`, model: i % 2 === 0 ? 'local-1' : 'held-3' })).status).toBe(400);
      }
    }
  });
  afterAll(() => t.close());

  const ask = async (from: number, to: number, query: string): Promise<Row[]> => {
    const res = await t.api.send(
      'get',
      `/admin/usage?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}${query.includes('limit=') ? '' : '&limit=1000'}${query}`,
      { headers: bearer(ADMIN_SECRET) },
    );
    expect([query, res.status, res.status === 200 ? null : res.body]).toEqual([query, 200, null]);
    return res.body.data as Row[];
  };
  const asMap = (rows: Row[], fields: ReadonlyArray<keyof Row>) =>
    new Map(
      rows.map((row) => [
        JSON.stringify(fields.map((field) => row[field] ?? null)),
        Object.fromEntries([...SUMS, 'upstream_cost_usd', 'margin_usd', 'failures'].map((f) => [f, row[f as keyof Row]])),
      ]),
    );

  it('the SQL month start the settlement writes equals bucketStartOf(t, "month"), leap years and month ends included', async () => {
    const db = t.gateway.database.db;
    const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
    const times = [
      '2024-02-29T23:59:59.999Z',
      '2024-03-01T00:00:00.000Z',
      '2026-11-30T23:00:00.000Z',
      '2026-12-31T23:59:59.999Z',
      '2027-01-01T00:00:00.000Z',
      '2100-02-28T12:00:00.000Z',
    ].map(Date.parse);
    for (let at = Date.parse('2025-01-01T00:00:00Z'); at < Date.parse('2027-01-01T00:00:00Z'); at += 7 * DAY + 5 * HOUR + 1) times.push(at);
    for (const at of times) {
      const { rows } = await sql<{ m: number | string }>`SELECT ${sql.raw(monthStartSql(String(at), postgres))} AS m`.execute(db);
      expect([new Date(at).toISOString(), Number(rows[0]?.m)]).toEqual([new Date(at).toISOString(), bucketStartOf(at, 'month')]);
    }
  });

  it('each coarser table holds the sums of its finer one', async () => {
    const db = t.gateway.database.db;
    const days = await db.selectFrom('usage_key_days').selectAll().execute();
    const months = new Map<string, Record<string, number>>();
    for (const day of days) {
      const group = `${bucketStartOf(Number(day.day_start), 'month')} ${day.key_id}`;
      const entry = months.get(group) ?? { requests: 0, succeeded: 0, failed: 0, canceled: 0, blocked: 0, images: 0, credits: 0 };
      entry.requests! += Number(day.requests);
      entry[day.status]! += Number(day.requests);
      entry.images! += Number(day.images);
      entry.credits! += Number(day.credits);
      months.set(group, entry);
    }
    const stored = await db.selectFrom('usage_key_months').selectAll().execute();
    expect(
      new Map(
        stored.map((m) => [
          `${m.month_start} ${m.key_id}`,
          {
            requests: Number(m.requests),
            succeeded: Number(m.succeeded),
            failed: Number(m.failed),
            canceled: Number(m.canceled),
            blocked: Number(m.blocked),
            images: Number(m.images),
            credits: Number(m.credits),
          },
        ]),
      ),
    ).toEqual(months);
    expect(stored.length).toBeGreaterThanOrEqual(6);
    // Blocked requests are among the sums (the months' `blocked` count from the days' 'blocked' rows).
    expect(stored.some((m) => Number(m.blocked) > 0)).toBe(true);

    const hourly = await db.selectFrom('usage_rollup_totals').selectAll().execute();
    const daily = new Map<string, number[]>();
    for (const hour of hourly) {
      const group = [Number(hour.hour_start) - (Number(hour.hour_start) % DAY), hour.model, hour.provider, hour.channel_id, hour.status, hour.error_code].join(
        ' ',
      );
      const entry = daily.get(group) ?? [0, 0, 0];
      daily.set(group, [entry[0]! + Number(hour.requests), entry[1]! + Number(hour.images), entry[2]! + Number(hour.credits)]);
    }
    const storedDays = await db.selectFrom('usage_day_totals').selectAll().execute();
    expect(
      new Map(
        storedDays.map((d) => [
          [d.day_start, d.model, d.provider, d.channel_id, d.status, d.error_code].join(' '),
          [Number(d.requests), Number(d.images), Number(d.credits)],
        ]),
      ),
    ).toEqual(daily);
  });

  it('questions about keys, owners and models over ranges of mixed grains equal the sums of the hourly rows', async () => {
    const last = bucketStartOf(t.clock.now(), 'hour') + HOUR;
    const firstDay = firstHour - (firstHour % DAY);
    const ranges: Array<[number, number]> = [
      [firstHour, last],
      [firstDay - 3 * DAY, last + 2 * DAY],
      [firstHour + 3 * HOUR, firstDay + 5 * DAY + 7 * HOUR],
      [firstDay + DAY, last - 5 * HOUR],
      [firstDay + 5 * DAY, firstDay + 50 * DAY],
      [firstHour + HOUR, firstHour + 9 * HOUR],
      [bucketStartOf(firstHour, 'month'), last + 30 * DAY],
      // A month less the days before the range (settlements on them), and the hours before those days.
      [firstDay + 7 * DAY, last],
      [firstDay + 6 * DAY + 15 * HOUR, last],
      [firstDay + 6 * DAY + 17 * HOUR, firstDay + 60 * DAY],
    ];
    for (const [from, to] of ranges) {
      const reference = await ask(from, to, '&group_by=key,model');
      expect(asMap(await ask(from, to, '&group_by=key'), ['key_id'])).toEqual(sumBy(reference, ['key_id']));
      const top = await ask(from, to, '&group_by=key&order=credits_desc&limit=1');
      // The most credits; among keys tied on them, the engine's text order of ids decides, so any of them.
      const credits = [...sumBy(reference, ['key_id']).entries()].map(([group, row]) => [JSON.parse(group)[0] as string, row.credits_charged] as const);
      const most = Math.max(...credits.map(([, charged]) => charged));
      expect(top.map((row) => row.credits_charged)).toEqual(credits.length > 0 ? [most] : []);
      if (credits.length > 0) expect(credits.filter(([, charged]) => charged === most).map(([id]) => id)).toContain(top[0]!.key_id);
      const byOwnerMonth = await ask(from, to, '&group_by=owner&bucket=month');
      expect(asMap(byOwnerMonth, ['bucket_start', 'owner'])).toEqual(
        sumBy(await ask(from, to, '&group_by=owner,model&bucket=month'), ['bucket_start', 'owner']),
      );
      const ben = sumBy(
        reference.filter((row) => row.key_id === keys[1]!.id),
        [],
      );
      const benAsked = await ask(from, to, `&key_id=${keys[1]!.id}`);
      // Without rows in range the answer is one row of zeros.
      if (ben.size > 0) expect(asMap(benAsked, [])).toEqual(ben);
      else expect(benAsked.map((row) => row.requests)).toEqual([0]);
      expect(asMap(await ask(from, to, '&group_by=model&bucket=day'), ['bucket_start', 'model'])).toEqual(
        sumBy(await ask(from, to, '&group_by=model,key&bucket=day'), ['bucket_start', 'model']),
      );
      expect(asMap(await ask(from, to, '&group_by=model'), ['model'])).toEqual(sumBy(reference, ['model']));
    }
  });
});
