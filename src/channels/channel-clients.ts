import { ImagesApiClient } from '../providers/images-api/images-api-client';
import { JIMENG_ARK_EXTRA_BODY } from '../providers/jimeng/jimeng.provider';
import { VisualTransport } from '../providers/jimeng/visual-transport';
import type { ProviderImage, ProviderRequest } from '../providers/provider';
import type { Channel, ChannelCredentials } from './channel.model';

/** Speaks one channel's wire format with its own credentials. */
export interface ChannelClient {
  generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]>;
}

/** Whether the transport makes one upstream call per image (so each image is routed on its own). */
export function oneImagePerCall(channel: Pick<Channel, 'transport'>): boolean {
  return channel.transport === 'visual' || channel.transport === 'ark';
}

/** The client for an API channel, from its opened credentials; `publicOnly` unless private upstreams are allowed. */
export function apiChannelClient(channel: Channel, credentials: ChannelCredentials, settings: { pollIntervalMs: number; publicOnly: boolean }): ChannelClient {
  const { pollIntervalMs, publicOnly } = settings;
  const baseUrl = channel.baseUrl as string;
  if (channel.transport === 'visual') {
    if (!('access_key_id' in credentials)) throw new Error(`channel ${channel.id}: visual channels need access_key_id and secret_access_key`);
    return new VisualTransport({
      endpoint: baseUrl,
      credentials: { accessKeyId: credentials.access_key_id, secretAccessKey: credentials.secret_access_key },
      pollIntervalMs,
      publicOnly,
    });
  }
  if (!('api_key' in credentials)) throw new Error(`channel ${channel.id}: ${channel.transport} channels need api_key`);
  return new ImagesApiClient({
    provider: channel.provider,
    baseUrl,
    apiKey: credentials.api_key,
    ...(channel.transport === 'ark' ? { extraBody: JIMENG_ARK_EXTRA_BODY } : {}),
    oneImagePerCall: channel.transport === 'ark',
    publicOnly,
  });
}
