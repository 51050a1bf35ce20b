import type { Kysely } from 'kysely';
import type { components, operations } from '../../generated/gateway';
import type { Database } from '../db/schema';

type Schemas = components['schemas'];
export type UsageReport = Schemas['UsageReport'];
export type UsageReportQuery = NonNullable<operations['getUsageReport']['parameters']['query']>;

/** GET /admin/usage: usage summed from the rollups written with each settlement (never raw generation rows). */
export class UsageReportService {
  constructor(private readonly db: Kysely<Database>) {}

  // eslint-disable-next-line @typescript-eslint/require-await -- the rollup query lands with the rollups
  async report(_query: UsageReportQuery): Promise<UsageReport> {
    void this.db;
    return { data: [], next_cursor: null };
  }

  toCsv(_report: UsageReport, _query: UsageReportQuery): string {
    return '';
  }
}
