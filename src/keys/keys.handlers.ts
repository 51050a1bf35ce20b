import { gatewayOperations } from '../../generated/gateway.operations';
import { auditContextOf } from '../audit/audit-log';
import type { GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import type { KeysService } from './keys.service';

type KeyHandlers = Pick<GatewayHandlers, 'createKey' | 'listKeys' | 'getKey' | 'updateKey' | 'disableKey' | 'setKeyQuota' | 'rotateKey'>;

/** The /admin/keys operations: each a thin call into KeysService (mutations carry the audit context). */
export function keyHandlers(keys: KeysService): KeyHandlers {
  return {
    createKey: async (request) => {
      const created = await keys.createKey(request.body, auditContextOf(request));
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getKey.path, { id: created.id }) }, body: created };
    },
    listKeys: async ({ query }) => ({ status: 200, body: await keys.listKeys(query) }),
    getKey: async ({ params }) => ({ status: 200, body: await keys.getKey(params.id) }),
    updateKey: async (request) => ({ status: 200, body: await keys.updateKey(request.params.id, request.body, auditContextOf(request)) }),
    disableKey: async (request) => ({ status: 200, body: await keys.disableKey(request.params.id, auditContextOf(request)) }),
    setKeyQuota: async (request) => ({ status: 200, body: await keys.setQuota(request.params.id, request.body, auditContextOf(request)) }),
    rotateKey: async (request) => ({ status: 200, body: await keys.rotateKey(request.params.id, auditContextOf(request)) }),
  };
}
