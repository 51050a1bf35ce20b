import { gatewayOperations } from '../../generated/gateway.operations';
import type { GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import type { KeysService } from './keys.service';

type KeyHandlers = Pick<GatewayHandlers, 'createKey' | 'listKeys' | 'getKey' | 'updateKey' | 'disableKey' | 'setKeyQuota' | 'rotateKey'>;

/** The /admin/keys operations: each a thin call into KeysService. */
export function keyHandlers(keys: KeysService): KeyHandlers {
  return {
    createKey: async ({ body }) => {
      const created = await keys.createKey(body);
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getKey.path, { id: created.id }) }, body: created };
    },
    listKeys: async ({ query }) => ({ status: 200, body: await keys.listKeys(query) }),
    getKey: async ({ params }) => ({ status: 200, body: await keys.getKey(params.id) }),
    updateKey: async ({ params, body }) => ({ status: 200, body: await keys.updateKey(params.id, body) }),
    disableKey: async ({ params }) => ({ status: 200, body: await keys.disableKey(params.id) }),
    setKeyQuota: async ({ params, body }) => ({ status: 200, body: await keys.setQuota(params.id, body) }),
    rotateKey: async ({ params }) => ({ status: 200, body: await keys.rotateKey(params.id) }),
  };
}
