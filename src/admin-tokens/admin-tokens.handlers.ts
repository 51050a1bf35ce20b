import { gatewayOperations } from '../../generated/gateway.operations';
import { auditContextOf } from '../audit/audit-log';
import type { GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import type { AdminTokensService } from './admin-tokens.service';

type AdminTokenHandlers = Pick<GatewayHandlers, 'createAdminToken' | 'listAdminTokens' | 'getAdminToken' | 'revokeAdminToken' | 'getAdminIdentity'>;

/** The /admin/tokens operations: each a thin call into AdminTokensService. */
export function adminTokenHandlers(tokens: AdminTokensService): AdminTokenHandlers {
  return {
    createAdminToken: async (request) => {
      const created = await tokens.createToken(request.body, request.principal, auditContextOf(request));
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getAdminToken.path, { id: created.id }) }, body: created };
    },
    listAdminTokens: async ({ query }) => ({ status: 200, body: await tokens.listTokens(query) }),
    getAdminToken: async ({ params }) => ({ status: 200, body: await tokens.getToken(params.id) }),
    revokeAdminToken: async (request) => ({ status: 200, body: await tokens.revokeToken(request.params.id, request.principal, auditContextOf(request)) }),
    getAdminIdentity: async ({ principal }) => ({ status: 200, body: await tokens.identityOf(principal) }),
  };
}
