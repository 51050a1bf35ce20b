import type { operations } from '../../generated/gateway';
import { type Schemas, api, dataOf } from './api';

import type { UsageRow } from './usage-series';

export { type Bucket, type Dimension, type Metric, type Series, type UsageRow, bucketEnd, bucketName, bucketStarts, bucketTick, groupOf, rangeOf, seriesOf, thinned } from './usage-series';

type Query = operations['getUsageReport']['parameters']['query'];
type Report = Schemas['UsageReport'];

/** Every page of a report (rows are few: groups × buckets). */
export async function usageRows(query: Query, maxPages = 20): Promise<UsageRow[]> {
  const rows: UsageRow[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < maxPages; page++) {
    // The JSON form (the operation also answers CSV, for usageCsv).
    const report = dataOf(await api.GET('/admin/usage', { params: { query: { ...query, limit: 1000, ...(cursor ? { cursor } : {}) } } })) as Report;
    rows.push(...report.data);
    if (!report.next_cursor) break;
    cursor = report.next_cursor;
  }
  return rows;
}

/** The same report as CSV (Accept: text/csv), every page, one header row. */
export async function usageCsv(query: Query, maxPages = 50): Promise<string> {
  let csv = '';
  let cursor: string | undefined;
  for (let page = 0; page < maxPages; page++) {
    const { data, error, response } = await api.GET('/admin/usage', {
      params: { query: { ...query, limit: 1000, ...(cursor ? { cursor } : {}) } },
      headers: { Accept: 'text/csv' },
      parseAs: 'text',
    });
    if (error !== undefined || data === undefined) throw new Error(`The CSV export failed (${response.status}).`);
    const text = data as unknown as string;
    csv += page === 0 ? text : text.slice(text.indexOf('\n') + 1);
    cursor = response.headers.get('X-Next-Cursor') ?? undefined;
    if (!cursor) break;
  }
  return csv;
}

