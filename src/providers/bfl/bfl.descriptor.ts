import { declareVariable, httpUrl, text } from '../../config/env-types';
import { apiKeyConnection, type ProviderDescriptor } from '../descriptor';
import { BFL_HOSTS, BFL_RESULT_LIFE_MS, BflClient } from './bfl-client';
import { BFL_ERRORS } from './bfl-errors';
import { BFL_MODELS } from './bfl-models';

/**
 * Black Forest Labs' FLUX API (`POST https://api.bfl.ai/v1/{model}`, key as `x-key`): one task per
 * image, polled by the URL BFL answers.
 */
export const BFL: ProviderDescriptor = {
  format: 'bfl',
  title: "Black Forest Labs' FLUX API (`api.bfl.ai/v1/{model}`; API key sent as `x-key`)",
  providers: ['bfl'],
  credentials: { fields: [{ name: 'api_key', secret: true }], hintField: 'api_key' },
  // BFL_API_KEY is the name BFL's own docs and examples read (`-H "x-key: ${BFL_API_KEY}"`).
  environment: {
    credentials: { api_key: 'BFL_API_KEY' },
    baseUrl: 'BFL_BASE_URL',
    variables: {
      BFL_API_KEY: declareVariable(text.optional(), {
        description: 'API key of Black Forest Labs (provider `bfl`, sent as `x-key`)',
        secret: true,
        field: 'providers.accounts.*.credentials.api_key',
        defaultText: 'none',
      }),
      BFL_BASE_URL: declareVariable(httpUrl.default('https://api.bfl.ai'), {
        description: "base URL of BFL's API (`https://api.eu.bfl.ai` or `https://api.us.bfl.ai` to stay in a region)",
      }),
    },
  },
  defaultBaseUrl: 'https://api.bfl.ai',
  calls: 'one-per-image',
  // Results are served from delivery.*.bfl.ai hosts (regional names that change), polling URLs from api.*.bfl.ai.
  resultHosts: BFL_HOSTS,
  models: BFL_MODELS,
  // FLUX.2 [pro] is priced per megapixel by BFL (3 cents the first, 1.5 each further one): a tier per MP, rounded up.
  catalog: [
    { model: 'flux-pro-1.1', provider: 'bfl', upstream_model: 'flux-pro-1.1', credits_per_image: 4, default_size: '1024x768' },
    { model: 'flux-kontext-pro', provider: 'bfl', upstream_model: 'flux-kontext-pro', credits_per_image: 4, default_size: '1024x1024' },
    {
      model: 'flux-2-pro',
      provider: 'bfl',
      upstream_model: 'flux-2-pro',
      credits_per_image: 8,
      price_table: [
        { tier: '1 MP', max_pixels: 1024 * 1024, credits: 3 },
        { tier: '2 MP', max_pixels: 2 * 1024 * 1024, credits: 5 },
        { tier: '3 MP', max_pixels: 3 * 1024 * 1024, credits: 6 },
        { tier: '4 MP', max_pixels: 4 * 1024 * 1024, credits: 8 },
      ],
      default_size: '1024x1024',
    },
  ],
  errors: BFL_ERRORS,
  // BFL's polling URLs are about 80 characters: they fit the task journal's task_id (200).
  resume: { holds: 'the polling URL', lifeMs: BFL_RESULT_LIFE_MS },
  createClient(account, settings) {
    return new BflClient({
      ...apiKeyConnection(account, BFL, settings),
      pollIntervalMs: settings.pollIntervalMs,
    });
  },
};
