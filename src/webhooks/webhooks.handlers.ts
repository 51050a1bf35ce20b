import { gatewayOperations } from '../../generated/gateway.operations';
import type { GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import type { WebhooksService } from './webhooks.service';

type WebhookHandlers = Pick<
  GatewayHandlers,
  | 'createWebhookEndpoint'
  | 'listWebhookEndpoints'
  | 'getWebhookEndpoint'
  | 'updateWebhookEndpoint'
  | 'deleteWebhookEndpoint'
  | 'rotateWebhookSecret'
  | 'sendTestWebhook'
  | 'listWebhookDeliveries'
>;

/** The /admin/webhooks operations: each a thin call into WebhooksService. */
export function webhookHandlers(webhooks: WebhooksService): WebhookHandlers {
  return {
    createWebhookEndpoint: async ({ body }) => {
      const created = await webhooks.create(body);
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getWebhookEndpoint.path, { id: created.id }) }, body: created };
    },
    listWebhookEndpoints: async () => ({ status: 200, body: await webhooks.list() }),
    getWebhookEndpoint: async ({ params }) => ({ status: 200, body: await webhooks.get(params.id) }),
    updateWebhookEndpoint: async ({ params, body }) => ({ status: 200, body: await webhooks.update(params.id, body) }),
    deleteWebhookEndpoint: async ({ params }) => {
      await webhooks.delete(params.id);
      return { status: 204, body: undefined };
    },
    rotateWebhookSecret: async ({ params, body }) => ({ status: 200, body: await webhooks.rotateSecret(params.id, body?.overlap_seconds ?? 86_400) }),
    sendTestWebhook: async ({ params }) => ({ status: 202, body: await webhooks.sendTest(params.id) }),
    listWebhookDeliveries: async ({ params, query }) => ({ status: 200, body: await webhooks.listDeliveries(params.id, query) }),
  };
}
