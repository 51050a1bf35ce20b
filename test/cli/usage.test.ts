import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { cliRunner } from './cli-harness';
import { bucketStartOf } from '../../src/usage/usage-query';

const HOUR = 3_600_000;

describe('admin CLI: usage (getUsageReport)', () => {
  let t: TestGateway;
  let keyId = '';
  beforeAll(async () => {
    t = await startTestGateway();
    const { id, key } = await t.createKey({ owner: 'cli@example.com', metadata: { team: 'a,b' } });
    keyId = id;
    for (const n of [1, 2]) expect((await t.api.client(key, localRequest({ n }))).status).toBe(200);
  });
  afterAll(() => t.close());
  const { cli, json, usageError, help } = cliRunner(() => t);
  const range = () => {
    const hour = bucketStartOf(Date.now(), 'hour');
    return ['--from', new Date(hour - HOUR).toISOString(), '--to', new Date(hour + HOUR).toISOString()];
  };

  it("usage --help prints help and exits 0; the range's defaults are the API's", async () => {
    const out = await help(['usage', '--help']);
    expect(out.replace(/\s+/g, ' ')).toContain("--from <time> start, a whole UTC hour (default: the API's, the start of --to's calendar month, UTC)");
  });

  it.each([
    [['usage', '--from', '2026-11-01T00:30:00Z'], /must be a whole UTC hour/],
    [['usage', '--bucket', 'week'], /Allowed choices are hour, day, month/],
    [['usage', '--limit', 'ten'], /'ten' is invalid/],
  ])('usage error %j exits 2', async (args, message) => {
    await usageError(args, message);
  });

  it('--json prints the API answer; the default range (the month so far) includes what was just made', async () => {
    const report = await json(['usage', '--group-by', 'key']);
    expect(report.data).toEqual([expect.objectContaining({ key_id: keyId, requests: 2, succeeded: 2, images_delivered: 3, credits_charged: 3 })]);
    expect(report.next_cursor).toBeNull();
  });

  it('a table with the grouped columns and the sums', async () => {
    const out = await cli(['usage', ...range(), '--group-by', 'owner,metadata.team', '--bucket', 'hour', '--limit', '1']);
    expect(out.code).toBe(0);
    const [header, row] = out.stdout.split('\n');
    expect(header).toMatch(
      /^BUCKET\s+OWNER\s+METADATA\.TEAM\s+REQUESTS\s+OK\s+FAILED\s+CANCELED\s+BLOCKED\s+IMAGES\s+CREDITS\s+P50_MS\s+P95_MS\s+P99_MS\s+FAILURES$/,
    );
    expect(row).toMatch(/^\S+Z\s+cli@example\.com\s+a,b\s+2\s+2\s+0\s+0\s+0\s+3\s+3\s+\d+\s+\d+\s+\d+$/);
  });

  it("--csv prints the API's CSV (quoted where needed)", async () => {
    const out = await cli(['usage', ...range(), '--group-by', 'metadata.team', '--csv']);
    expect(out).toMatchObject({ code: 0, stderr: '' });
    expect(out.stdout).toMatch(
      /^metadata\.team,requests,succeeded,failed,canceled,blocked,images_delivered,credits_charged,upstream_cost_usd,margin_usd,latency_p50_ms,latency_p95_ms,latency_p99_ms,failures\r\n"a,b",2,2,0,0,0,3,3,,,\d+,\d+,\d+,\r\n$/,
    );
  });

  it('--group-by project and --project: a project_id column, - for keys in no project; only the keys of that project', async () => {
    const project = await t.api.admin('post', '/admin/projects', { name: 'cli', owner: 'cli@example.com', credits_quota: 100, quota_period_days: 30 });
    expect(project.status).toBe(201);
    const projectId = project.body.id as string;
    const inside = await t.createKey({ project_id: projectId });
    expect((await t.api.client(inside.key, localRequest({ n: 3 }))).status).toBe(200);
    const out = await cli(['usage', ...range(), '--group-by', 'project']);
    expect(out.code).toBe(0);
    const [header, ...rows] = out.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^PROJECT_ID\s+REQUESTS\s+OK\s+/);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/^-\s+2\s+2\s+0\s+0\s+0\s+3\s+3\s/);
    expect(rows[1]).toMatch(new RegExp(`^${projectId}\\s+1\\s+1\\s+0\\s+0\\s+0\\s+3\\s+3\\s`));
    const only = await json(['usage', ...range(), '--project', projectId, '--group-by', 'key']);
    expect(only.data).toEqual([expect.objectContaining({ key_id: inside.id, requests: 1, credits_charged: 3 })]);
  });

  it('an API refusal exits 1 with its message', async () => {
    const out = await cli(['usage', '--from', '2026-11-02T00:00:00Z', '--to', '2026-11-01T00:00:00Z']);
    expect(out).toMatchObject({ code: 1, stdout: '' });
    expect(out.stderr).toMatch(/400 invalid_request: to: must be after from/);
  });
});

describe("admin CLI: usage without --from or --to sends no range (the API's default, the calendar month so far)", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
    // The gateway's clock 40 days ahead: another calendar month than the CLI's own clock, whatever the date.
    t.clock.advanceDays(40);
    const { key } = await t.createKey({ owner: 'month@example.com' });
    expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
  });
  afterAll(() => t.close());
  const { json } = cliRunner(() => t);

  it("reports the gateway's month so far, as GET /admin/usage without a range does", async () => {
    const report = await json(['usage', '--group-by', 'owner']);
    expect(report.data).toEqual([expect.objectContaining({ owner: 'month@example.com', requests: 1, images_delivered: 2 })]);
    const api = await t.api.admin('get', '/admin/usage?group_by=owner');
    expect(api.status).toBe(200);
    expect(report.data).toEqual(api.body.data);
  });
});
