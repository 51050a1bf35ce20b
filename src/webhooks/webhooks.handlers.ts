import { gatewayOperations } from '../../generated/gateway.operations';
import { auditContextOf } from '../audit/audit-log';
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

/** The /admin/webhooks operations: each a thin call into WebhooksService (mutations carry the audit context). */
export function webhookHandlers(webhooks: WebhooksService): WebhookHandlers {
  return {
    createWebhookEndpoint: async (request) => {
      const created = await webhooks.create(request.body, auditContextOf(request));
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getWebhookEndpoint.path, { id: created.id }) }, body: created };
    },
    listWebhookEndpoints: async () => ({ status: 200, body: await webhooks.list() }),
    getWebhookEndpoint: async ({ params }) => ({ status: 200, body: await webhooks.get(params.id) }),
    updateWebhookEndpoint: async (request) => ({ status: 200, body: await webhooks.update(request.params.id, request.body, auditContextOf(request)) }),
    deleteWebhookEndpoint: async (request) => {
      await webhooks.delete(request.params.id, auditContextOf(request));
      return { status: 204, body: undefined };
    },
    rotateWebhookSecret: async (request) => ({
      status: 200,
      body: await webhooks.rotateSecret(request.params.id, request.body?.overlap_seconds ?? 86_400, auditContextOf(request)),
    }),
    sendTestWebhook: async (request) => ({ status: 202, body: await webhooks.sendTest(request.params.id, auditContextOf(request)) }),
    listWebhookDeliveries: async ({ params, query }) => ({ status: 200, body: await webhooks.listDeliveries(params.id, query) }),
  };
}
