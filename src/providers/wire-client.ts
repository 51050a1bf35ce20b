import type { WireAccount, WireSettings } from './descriptor';
import { requireDescriptor } from './formats';
import type { WireClient } from './provider';

export type { WireAccount, WireSettings } from './descriptor';

/** The wire formats the gateway speaks (a channel's `transport`): the registry's (formats.ts). */
export type WireFormat = string;

/**
 * The one map from an account to its client, for the environment's accounts and the API's
 * channels alike: the account's format's descriptor builds it. `provider` names the upstream in
 * errors and logs.
 */
export function wireClient(account: WireAccount, settings: WireSettings): WireClient {
  return requireDescriptor(account.format).createClient(account, settings);
}
