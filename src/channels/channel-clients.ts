import { credentialsOf } from '../providers/descriptor';
import { requireDescriptor } from '../providers/formats';
import type { WireClient } from '../providers/provider';
import { wireClient } from '../providers/wire-client';
import type { Channel, ChannelCredentials } from './channel.model';

/** Speaks one channel's wire format with its own credentials. */
export type ChannelClient = WireClient;

/** The client for an API channel, from its opened credentials; `publicOnly` unless private upstreams are allowed. */
export function apiChannelClient(channel: Channel, credentials: ChannelCredentials, settings: { pollIntervalMs: number; publicOnly: boolean }): ChannelClient {
  const descriptor = requireDescriptor(channel.transport);
  if (!descriptor.credentials) throw new Error(`channel ${channel.id}: only the environment has a ${channel.transport} channel`);
  const account = {
    format: channel.transport,
    provider: channel.provider,
    baseUrl: channel.baseUrl as string,
    credentials: credentials as Readonly<Record<string, string>>,
  };
  try {
    credentialsOf(account, descriptor);
  } catch (error) {
    throw new Error(`channel ${channel.id}: ${(error as Error).message}`);
  }
  return wireClient(account, settings);
}
