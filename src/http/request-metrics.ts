import type { Request, Response } from 'express';
import type { GatewayMetrics } from '../metrics/metrics';

/** The spec's path template when the validator matched one, else Express's route, else "unmatched". */
function routeOf(req: Request): string {
  const openapi = (req as Request & { openapi?: { openApiRoute?: string } }).openapi;
  return openapi?.openApiRoute ?? (req.route?.path as string | undefined) ?? 'unmatched';
}

/** Counts a finished request by route template (never the raw path: ids would explode the label space). */
export function countRequest(metrics: GatewayMetrics, listener: 'public' | 'internal', req: Request, res: Response): void {
  metrics.httpRequests.inc({ listener, method: req.method, route: routeOf(req), status: String(res.statusCode) });
}
