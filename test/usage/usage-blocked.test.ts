import { sql } from 'kysely';
import { type BooksGateway, UPSTREAM_REFUSAL, startBooksGateway } from '../helpers/books';
import { bearer } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import type { components } from '../../generated/gateway';
import { bucketEndOf, bucketStartOf } from '../../src/usage/usage-query';

type UsageRow = components['schemas']['UsageReportRow'];

const HOUR = 3_600_000;
const SUMS = ['requests', 'succeeded', 'failed', 'canceled', 'blocked', 'images_delivered', 'credits_charged'] as const;

/** Rows' sums and failures added up (a bucketed answer may span two hours or days when the run crosses one). */
function total(rows: UsageRow[]): Record<string, unknown> {
  const sums: Record<string, number> = Object.fromEntries(SUMS.map((name) => [name, 0]));
  const failures: Record<string, number> = {};
  for (const row of rows) {
    for (const name of SUMS) sums[name]! += row[name];
    for (const [code, count] of Object.entries(row.failures)) failures[code] = (failures[code] ?? 0) + count;
  }
  return { ...sums, failures };
}

/**
 * Issue #38 §2: a request a key's prompt rules refuse (400 prompt_blocked, nothing reserved or
 * sent) counts in usage analytics as `blocked`, apart from the upstream's moderation refusals,
 * which are failed generations: every grain (hours, days, months), the totals without the key, and
 * the CSV, on both engines.
 */
describe('blocked requests in usage analytics (GET /admin/usage)', () => {
  let booksGateway: BooksGateway;
  let t: TestGateway;
  let guarded: { id: string; key: string };
  let moderated: { id: string; key: string };
  /** The guarded key's project (the moderated key is in none). */
  let projectId = '';
  let started = 0;
  let ended = 0;

  beforeAll(async () => {
    booksGateway = await startBooksGateway();
    t = booksGateway.t;
    started = t.clock.now();
    const project = await t.api.admin('post', '/admin/projects', { name: 'brands', owner: 'o@example.com', credits_quota: 1000, quota_period_days: 30 });
    expect(project.status).toBe(201);
    projectId = project.body.id as string;
    guarded = await t.createKey({ project_id: projectId, prompt_rules: [{ id: 'gr_no_brands', kind: 'blocked_term', term: 'AcmeCola' }] });
    moderated = await t.createKey({ allowed_providers: ['jimeng'] });
    const blocked = await t.api.client(guarded.key, { prompt: 'a can of acmecola', model: 'local-1' });
    expect([blocked.status, blocked.body.error.code]).toEqual([400, 'prompt_blocked']);
    expect((await t.api.client(guarded.key, { prompt: 'a quiet beach', model: 'local-1', response_format: 'b64_json' })).status).toBe(200);
    // The upstream's own moderation: the prompt refused (content_policy_violation), the image withheld (output_moderated).
    const input = await t.api.client(moderated.key, { prompt: `input ${UPSTREAM_REFUSAL}`, model: 'held-1' });
    expect([input.status, input.body.error.code]).toEqual([400, 'content_policy_violation']);
    const output = await t.api.client(moderated.key, { prompt: 'output [error:OutputImageSensitiveContentDetected:400]', model: 'held-1' });
    expect([output.status, output.body.error.code]).toEqual([422, 'output_moderated']);
    await until(async () => (await booksGateway.books.violations({ settled: true })).length === 0, 'every generation to settle');
    ended = t.clock.now();
  });
  afterAll(() => booksGateway.close());

  const ask = async (from: number, to: number, query: string, headers: Record<string, string> = {}) => {
    const res = await t.api.send('get', `/admin/usage?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}${query}`, {
      headers: { ...bearer(ADMIN_SECRET), ...headers },
    });
    expect([res.status, res.status === 200 ? null : res.body]).toEqual([200, null]);
    return res;
  };
  /** Whole buckets of a grain around the run: hours, days or calendar months (each read from its own table). */
  const around = (grain: 'hour' | 'day' | 'month'): [number, number] => [bucketStartOf(started, grain), bucketEndOf(bucketStartOf(ended, grain), grain)];

  const GUARDED = { requests: 2, succeeded: 1, failed: 0, canceled: 0, blocked: 1, images_delivered: 1, credits_charged: 1, failures: {} };
  const MODERATED = {
    requests: 2,
    succeeded: 0,
    failed: 2,
    canceled: 0,
    blocked: 0,
    images_delivered: 0,
    credits_charged: 0,
    failures: { content_policy_violation: 1, output_moderated: 1 },
  };

  it.each(['hour', 'day', 'month'] as const)('a key: blocked 1, succeeded 1, requests 2 in %s buckets', async (grain) => {
    const [from, to] = around(grain);
    const rows = (await ask(from, to, `&key_id=${guarded.id}&bucket=${grain}`)).body.data as UsageRow[];
    expect(total(rows)).toEqual(GUARDED);
    for (const row of rows) expect(Date.parse(row.bucket_start!)).toBeGreaterThanOrEqual(from);
  });

  it('without buckets over whole months (usage_key_months): the gateway blocked one, the upstream refused two (failed, by code)', async () => {
    const [from, to] = around('month');
    const rows = (await ask(from, to, '&group_by=key')).body.data as UsageRow[];
    expect(new Map(rows.map((row) => [row.key_id, total([row])]))).toEqual(
      new Map([
        [guarded.id, GUARDED],
        [moderated.id, MODERATED],
      ]),
    );
    // The month rows themselves (two if the run crossed a month's end), summed.
    const stored = await t.gateway.database.db.selectFrom('usage_key_months').selectAll().where('key_id', '=', guarded.id).execute();
    const sum = (column: 'requests' | 'succeeded' | 'failed' | 'blocked') => stored.reduce((acc, m) => acc + Number(m[column]), 0);
    expect([sum('requests'), sum('succeeded'), sum('failed'), sum('blocked')]).toEqual([2, 1, 0, 1]);
  });

  it.each(['hour', 'day', 'month'] as const)(
    "by project (%s buckets, and the same range without buckets): the blocked request in its key's project, the key in no project in the null row",
    async (grain) => {
      const [from, to] = around(grain);
      const byProject = (rows: UsageRow[]) => new Map([projectId, null].map((id) => [id, total(rows.filter((row) => (row.project_id ?? null) === id))]));
      const expected = new Map<string | null, Record<string, unknown>>([
        [projectId, GUARDED],
        [null, MODERATED],
      ]);
      const bucketed = (await ask(from, to, `&group_by=project&bucket=${grain}`)).body.data as UsageRow[];
      expect(byProject(bucketed)).toEqual(expected);
      const whole = (await ask(from, to, '&group_by=project')).body.data as UsageRow[];
      expect(whole).toHaveLength(2);
      expect(byProject(whole)).toEqual(expected);
      expect(total((await ask(from, to, `&project_id=${projectId}`)).body.data as UsageRow[])).toEqual(GUARDED);
    },
  );

  it('the totals without the key (by model, per day): blocked under the model the key asked for, moderation under failed', async () => {
    const [from, to] = around('day');
    const rows = (await ask(from, to, '&group_by=model,provider&bucket=day')).body.data as UsageRow[];
    expect(total(rows.filter((row) => row.model === 'local-1' && row.provider === 'local'))).toEqual(GUARDED);
    expect(total(rows.filter((row) => row.model === 'held-1' && row.provider === 'jimeng'))).toEqual(MODERATED);
  });

  it('the rollup row of a blocked request: status blocked, its code, no channel, images, credits or latency', async () => {
    const rows = await t.gateway.database.db.selectFrom('usage_rollups').selectAll().where('key_id', '=', guarded.id).where('status', '=', 'blocked').execute();
    expect(rows).toHaveLength(1);
    const [row] = rows;
    expect(Number(row!.hour_start)).toBe(bucketStartOf(Number(row!.hour_start), 'hour'));
    expect(Number(row!.hour_start)).toBeGreaterThanOrEqual(bucketStartOf(started, 'hour'));
    expect(Number(row!.hour_start)).toBeLessThanOrEqual(ended);
    const latency = Object.entries(row!).filter(([column, count]) => column.startsWith('lat_') && count !== null);
    expect([row!.model, row!.provider, row!.channel_id, row!.error_code, Number(row!.requests), Number(row!.images), Number(row!.credits), latency]).toEqual([
      'local-1',
      'local',
      '',
      'prompt_blocked',
      1,
      0,
      0,
      [],
    ]);
  });

  it('CSV: a blocked column after canceled; blocked requests are not among the failures', async () => {
    const [from, to] = around('month');
    const res = await ask(from, to, `&group_by=key&order=requests_desc`, { Accept: 'text/csv' });
    const lines = res.text.split('\r\n');
    expect(lines[0]).toBe(
      'key_id,requests,succeeded,failed,canceled,blocked,images_delivered,credits_charged,upstream_cost_usd,margin_usd,latency_p50_ms,latency_p95_ms,latency_p99_ms,failures',
    );
    const byKey = new Map(lines.slice(1, -1).map((line) => [line.split(',')[0], line]));
    expect(byKey.get(guarded.id)).toMatch(new RegExp(`^${guarded.id},2,1,0,0,1,1,1,,,\\d+,\\d+,\\d+,$`));
    expect(byKey.get(moderated.id)).toBe(`${moderated.id},2,0,2,0,0,0,0,,,,,,content_policy_violation=1;output_moderated=1`);
  });

  it('a blocked request whose rollup write fails is still answered 400 prompt_blocked, and the failure is logged (without the prompt)', async () => {
    const db = t.gateway.database.db;
    await sql`ALTER TABLE usage_key_months RENAME TO usage_key_months_away`.execute(db);
    try {
      const logsBefore = t.logs.length;
      const res = await t.api.client(guarded.key, { prompt: 'another ACMECOLA can', model: 'local-1' });
      expect([res.status, res.body.error.code, res.body.error.param]).toEqual([400, 'prompt_blocked', 'prompt']);
      const logged = t.logs.slice(logsBefore);
      expect(logged.filter((line) => line.includes('could not be added to the usage rollups'))).toHaveLength(1);
      expect(logged.join('\n')).not.toMatch(/acmecola/i);
    } finally {
      await sql`ALTER TABLE usage_key_months_away RENAME TO usage_key_months`.execute(db);
    }
    // Nothing of it was kept: the write is all or nothing.
    const [from, to] = around('hour');
    expect(total((await ask(from, to + HOUR, `&key_id=${guarded.id}&bucket=hour`)).body.data as UsageRow[])).toEqual(GUARDED);
  });
});
