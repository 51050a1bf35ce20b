import { declareVariable, httpUrl, text } from '../../config/env-types';
import { apiKeyConnection, type ProviderDescriptor } from '../descriptor';
import { BFL_RESULT_LIFE_MS, BflClient } from './bfl-client';
import { BFL_ERRORS } from './bfl-errors';
import { BFL_MODELS } from './bfl-models';

const BFL_PRICING = 'https://docs.bfl.ai/quick_start/pricing';
const BFL_MEGAPIXEL = 1024 * 1024;

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
  // `result.sample` is on BFL's delivery hosts under bfl.ai (regional names that change: integration guide),
  // or on the Azure storage host BFL's own examples answer (docs.bfl.ai "Get Result", webhook payloads:
  // `https://bfldeliveryprod.blob.core.windows.net/results/...`).
  resultHosts: ['*.bfl.ai', 'bfldeliveryprod.blob.core.windows.net'],
  models: BFL_MODELS,
  // BFL's prices (docs.bfl.ai/quick_start/pricing, 1 BFL credit = $0.01): FLUX1.1 [pro] and Kontext [pro] per image;
  // FLUX.2 [pro] per megapixel of output (the first 3¢, each further one 1.5¢) and 1.5¢ per megapixel of each input
  // image (editing "from $0.045"), megapixels of 1024 × 1024 pixels, rounded up per image.
  catalog: [
    {
      model: 'flux-pro-1.1',
      provider: 'bfl',
      upstream_model: 'flux-pro-1.1',
      price: { currency: 'USD', source: BFL_PRICING, terms: [{ meter: 'image', rate: 0.04 }] },
      default_size: '1024x768',
    },
    {
      model: 'flux-kontext-pro',
      provider: 'bfl',
      upstream_model: 'flux-kontext-pro',
      price: { currency: 'USD', source: BFL_PRICING, terms: [{ meter: 'image', rate: 0.04 }] },
      default_size: '1024x1024',
    },
    {
      model: 'flux-2-pro',
      provider: 'bfl',
      upstream_model: 'flux-2-pro',
      price: {
        currency: 'USD',
        source: BFL_PRICING,
        terms: [
          { meter: 'image', rate: 0.03 },
          { meter: 'output_megapixel', rate: 0.015, megapixel: BFL_MEGAPIXEL, included_megapixels: 1 },
          { meter: 'input_megapixel', rate: 0.015, megapixel: BFL_MEGAPIXEL },
        ],
      },
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
