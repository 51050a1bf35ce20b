import type { ProviderDescriptor } from '../descriptor';
import { LOCAL_MODELS } from './local-models';
import { LocalProvider } from './local.provider';

/** The built-in renderer: no account, no upstream, always configured (the environment's only). */
export const LOCAL: ProviderDescriptor = {
  format: 'local',
  title: 'the built-in renderer (no upstream)',
  providers: ['local'],
  environment: { credentials: {}, settings: ['LOCAL_PROVIDER_MODE'], channelId: 'chn_envLocal', variables: {} },
  calls: 'one-for-n',
  offline: true,
  resultHosts: [],
  models: LOCAL_MODELS,
  catalog: [{ model: 'local-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '256x256' }],
  errors: [],
  createClient: (_account, settings) => new LocalProvider(settings.localMode ?? 'render'),
};
