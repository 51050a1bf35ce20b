import type { GatewayConfig } from '../config/config';
import { LocalProvider } from './local/local.provider';
import { ProviderRegistry } from './registry';
import { UnavailableProvider } from './unavailable.provider';

/** Every provider the gateway knows, built from configuration. */
export function createProviderRegistry(_config: GatewayConfig): ProviderRegistry {
  return new ProviderRegistry([
    new LocalProvider(process.env.LOCAL_PROVIDER_MODE === 'tiny' ? 'tiny' : 'render'),
    new UnavailableProvider('jimeng', 'its adapter has not landed yet.'),
  ]);
}
