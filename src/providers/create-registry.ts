import type { GatewayConfig } from '../config/config';
import { JimengProvider } from './jimeng/jimeng.provider';
import { LocalProvider } from './local/local.provider';
import { OpenAiCompatibleProvider } from './openai-compatible/openai-compatible.provider';
import type { ImageProvider } from './provider';
import { ProviderRegistry } from './registry';
import { configureUpstreamHttp } from './upstream-http';

/** Every provider the gateway knows, built from configuration (the environment channels' clients). */
export function createProviderRegistry(config: GatewayConfig): ProviderRegistry {
  const { providers } = config;
  // The hop is shared by the environment's and the API channels' clients.
  configureUpstreamHttp({ connectTimeoutMs: providers.connectTimeoutMs });
  const raw: ImageProvider[] = [
    new LocalProvider(process.env.LOCAL_PROVIDER_MODE === 'tiny' ? 'tiny' : 'render'),
    new JimengProvider({
      visual: providers.volc && {
        endpoint: providers.volc.endpoint,
        credentials: { accessKeyId: providers.volc.accessKeyId, secretAccessKey: providers.volc.secretAccessKey },
        pollIntervalMs: providers.volc.pollIntervalMs,
      },
      ark: providers.ark,
    }),
  ];
  if (providers.openaiCompatible) raw.push(new OpenAiCompatibleProvider(providers.openaiCompatible.name, providers.openaiCompatible));
  return new ProviderRegistry(raw);
}
