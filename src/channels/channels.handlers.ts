import { gatewayOperations } from '../../generated/gateway.operations';
import { auditContextOf } from '../audit/audit-log';
import type { CreativeHandlers, GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import type { ChannelRouter } from './channel-router';
import { type ChannelsService, channelHealthResource } from './channels.service';

type ChannelHandlers = Pick<
  GatewayHandlers,
  'createChannel' | 'listChannels' | 'getChannel' | 'getChannelHealth' | 'updateChannel' | 'deleteChannel' | 'testChannel'
>;

/** The /admin/channels operations: each a thin call into ChannelsService (mutations carry the audit context). */
export function channelHandlers(channels: ChannelsService): ChannelHandlers {
  return {
    createChannel: async (request) => {
      const created = await channels.create(request.body, auditContextOf(request));
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getChannel.path, { id: created.id }) }, body: created };
    },
    listChannels: async ({ query }) => ({ status: 200, body: await channels.list(query) }),
    getChannel: async ({ params }) => ({ status: 200, body: await channels.get(params.id) }),
    getChannelHealth: async ({ params }) => ({ status: 200, body: await channels.health(params.id) }),
    updateChannel: async (request) => ({ status: 200, body: await channels.update(request.params.id, request.body, auditContextOf(request)) }),
    deleteChannel: async (request) => {
      await channels.delete(request.params.id, auditContextOf(request));
      return { status: 204, body: undefined };
    },
    testChannel: async (request) => ({ status: 200, body: await channels.test(request.params.id, request.body?.model, auditContextOf(request)) }),
  };
}

/** The internal API's per-channel health (service token). */
export function channelHealthHandlers(router: ChannelRouter): Pick<CreativeHandlers, 'listChannelHealth'> {
  return {
    listChannelHealth: async () => ({
      status: 200,
      body: {
        data: (await router.health()).map((health) => ({ name: health.channel.name, provider: health.channel.provider, ...channelHealthResource(health) })),
      },
    }),
  };
}
