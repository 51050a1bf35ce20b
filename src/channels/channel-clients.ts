import type { WireClient } from '../providers/provider';
import { wireClient } from '../providers/wire-client';
import type { Channel, ChannelCredentials } from './channel.model';

/** Speaks one channel's wire format with its own credentials. */
export type ChannelClient = WireClient;

/** Whether the transport makes one upstream call per image (so each image is routed on its own). */
export function oneImagePerCall(channel: Pick<Channel, 'transport'>): boolean {
  return channel.transport === 'visual' || channel.transport === 'ark';
}

/** The client for an API channel, from its opened credentials; `publicOnly` unless private upstreams are allowed. */
export function apiChannelClient(channel: Channel, credentials: ChannelCredentials, settings: { pollIntervalMs: number; publicOnly: boolean }): ChannelClient {
  const { provider } = channel;
  const baseUrl = channel.baseUrl as string;
  if (channel.transport === 'visual') {
    if (!('access_key_id' in credentials)) throw new Error(`channel ${channel.id}: visual channels need access_key_id and secret_access_key`);
    return wireClient({ format: 'visual', provider, baseUrl, credentials }, settings);
  }
  if (!('api_key' in credentials)) throw new Error(`channel ${channel.id}: ${channel.transport} channels need api_key`);
  if (channel.transport === 'local') throw new Error(`channel ${channel.id}: only the environment has a local channel`);
  return wireClient({ format: channel.transport, provider, baseUrl, credentials }, settings);
}
