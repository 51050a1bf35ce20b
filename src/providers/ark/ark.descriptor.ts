import { declareVariable, httpUrl, text } from '../../config/env-types';
import { apiKeyConnection, type ProviderDescriptor } from '../descriptor';
import { ImagesApiClient } from '../images-api/images-api-client';
import { ARK_ERRORS } from './ark-errors';
import { ARK_MODELS } from './ark-models';

/** Volcengine Ark / BytePlus ModelArk `POST /images/generations` (Seedream, SeedEdit): one image per call. */
export const ARK: ProviderDescriptor = {
  format: 'ark',
  title: 'Volcengine Ark / BytePlus ModelArk images API (Seedream, SeedEdit; API key)',
  providers: ['jimeng'],
  credentials: { fields: [{ name: 'api_key', secret: true }], hintField: 'api_key' },
  environment: {
    credentials: { api_key: 'ARK_API_KEY' },
    baseUrl: 'ARK_BASE_URL',
    channelId: 'chn_envJimengArk',
    variables: {
      ARK_API_KEY: declareVariable(text.optional(), {
        description: 'API key of Ark (jimeng, transport `ark`)',
        secret: true,
        field: 'providers.accounts.*.credentials.api_key',
        defaultText: 'none',
      }),
      ARK_BASE_URL: declareVariable(httpUrl.default('https://ark.cn-beijing.volces.com/api/v3'), { description: 'base URL of Ark' }),
    },
  },
  defaultBaseUrl: 'https://ark.cn-beijing.volces.com/api/v3',
  calls: 'one-per-image',
  // Results are served from TOS buckets under volces.com (BytePlus: the account's own region host).
  resultHosts: ['*.volces.com'],
  models: ARK_MODELS,
  // Jimeng 4.5 is Seedream 4.5 (the visual API has no 4.5 req_key); Seedream 5.0 lite takes 2K / 3K sizes.
  catalog: [
    {
      model: 'jimeng-4.5',
      provider: 'jimeng',
      transport: 'ark',
      upstream_model: 'doubao-seedream-4-5-251128',
      credits_per_image: 4,
      default_size: '2048x2048',
    },
    {
      model: 'jimeng-5.0-lite',
      provider: 'jimeng',
      transport: 'ark',
      upstream_model: 'doubao-seedream-5-0-260128',
      credits_per_image: 4,
      default_size: '2048x2048',
    },
  ],
  // Every other jimeng id: Ark's model ids, BytePlus ids and endpoint ids (`ep-…`) have no common form.
  modelIds: /./,
  errors: ARK_ERRORS,
  createClient(account, settings) {
    return new ImagesApiClient({
      ...apiKeyConnection(account, ARK, settings),
      // Ark's visible "AI generated" mark is on by default.
      extraBody: { watermark: false },
      oneImagePerCall: true,
      models: ARK_MODELS,
      errors: ARK_ERRORS,
      readsUsage: true,
    });
  },
};
