import type { GatewayHandlers } from '../http/handler-maps';
import type { AuditService } from './audit.service';

/** GET /admin/audit-events: the only audit operation (events are never changed through the API). */
export function auditHandlers(audit: AuditService): Pick<GatewayHandlers, 'listAuditEvents'> {
  return {
    listAuditEvents: async ({ query }) => ({ status: 200, body: await audit.listEvents(query) }),
  };
}
