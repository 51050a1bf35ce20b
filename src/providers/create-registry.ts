import type { GatewayConfig } from '../config/config';
import { BUILT_IN_PROVIDERS } from './formats';
import { ProviderRegistry } from './registry';
import { configureUpstreamHttp } from './upstream-http';
import { type WireAccount, wireClient } from './wire-client';

/** The environment-configured accounts, each with its client from the one wire-format map (wire-client.ts). */
export function createProviderRegistry(config: GatewayConfig): ProviderRegistry {
  const { providers } = config;
  // The hop is shared by the environment's and the API channels' clients.
  configureUpstreamHttp({ connectTimeoutMs: providers.connectTimeoutMs, keepAliveMs: providers.keepAliveMs });
  const accounts: WireAccount[] = [{ format: 'local', provider: 'local' }, ...providers.accounts];
  const settings = {
    // The environment's upstreams may be private addresses: the operator set them.
    publicOnly: false,
    pollIntervalMs: providers.pollIntervalMs,
    localMode: providers.localMode,
  };
  // Built-in providers are known whether or not their accounts are configured: a key may allow them before they are.
  const names = [...new Set([...BUILT_IN_PROVIDERS, ...providers.accounts.map((account) => account.provider)])];
  return new ProviderRegistry(
    names,
    accounts.map((account) => ({ provider: account.provider, format: account.format, client: wireClient(account, settings) })),
  );
}
