import type { GatewayConfig } from '../config/config';
import { ProviderRegistry } from './registry';
import { configureUpstreamHttp } from './upstream-http';
import { type WireAccount, wireClient } from './wire-client';

/** The environment-configured accounts, each with its client from the one wire-format map (wire-client.ts). */
export function createProviderRegistry(config: GatewayConfig): ProviderRegistry {
  const { providers } = config;
  // The hop is shared by the environment's and the API channels' clients.
  configureUpstreamHttp({ connectTimeoutMs: providers.connectTimeoutMs });
  const accounts: WireAccount[] = [{ format: 'local', provider: 'local' }];
  if (providers.volc) {
    const { endpoint, accessKeyId, secretAccessKey } = providers.volc;
    accounts.push({ format: 'visual', provider: 'jimeng', baseUrl: endpoint, credentials: { access_key_id: accessKeyId, secret_access_key: secretAccessKey } });
  }
  if (providers.ark) accounts.push({ format: 'ark', provider: 'jimeng', baseUrl: providers.ark.baseUrl, credentials: { api_key: providers.ark.apiKey } });
  const compat = providers.openaiCompatible;
  if (compat) accounts.push({ format: 'images-api', provider: compat.name, baseUrl: compat.baseUrl, credentials: { api_key: compat.apiKey } });
  const settings = {
    // The environment's upstreams may be private addresses: the operator set them.
    publicOnly: false,
    pollIntervalMs: providers.volc?.pollIntervalMs ?? 0,
    localMode: process.env.LOCAL_PROVIDER_MODE === 'tiny' ? ('tiny' as const) : ('render' as const),
  };
  // jimeng is known whether or not its accounts are configured: a key may allow it before they are.
  const names = ['local', 'jimeng', ...(compat ? [compat.name] : [])];
  return new ProviderRegistry(
    names,
    accounts.map((account) => ({ provider: account.provider, format: account.format, client: wireClient(account, settings) })),
  );
}
