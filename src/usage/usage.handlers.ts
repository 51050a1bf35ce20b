import type { GatewayHandlers } from '../http/handler-maps';
import type { UsageReportService } from './usage.service';

/** GET /admin/usage: JSON, or CSV when the client asks for text/csv. */
export function usageHandlers(usage: UsageReportService): Pick<GatewayHandlers, 'getUsageReport'> {
  return {
    getUsageReport: async ({ query, header }) => {
      const report = await usage.report(query);
      if (!prefersCsv(header('accept'))) return { status: 200, body: report };
      const headers: Record<string, string> = report.next_cursor === null ? {} : { 'X-Next-Cursor': report.next_cursor };
      return { status: 200, body: usage.toCsv(report, query), contentType: 'text/csv; charset=utf-8', headers };
    },
  };
}

/** text/csv ranked above application/json in Accept (ties go to CSV only when named first). */
export function prefersCsv(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  let csv = -1;
  let json = -1;
  accept.split(',').forEach((part, position) => {
    const [type, ...params] = part.trim().toLowerCase().split(';');
    const q = Number(
      params
        .map((p) => p.trim())
        .find((p) => p.startsWith('q='))
        ?.slice(2) ?? '1',
    );
    const rank = Number.isFinite(q) && q > 0 ? q * 1000 - position : -1;
    if (type === 'text/csv') csv = Math.max(csv, rank);
    else if (type === 'application/json' || type === '*/*' || type === 'application/*') json = Math.max(json, rank);
  });
  return csv > json;
}
