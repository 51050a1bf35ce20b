import { declareVariable, httpUrl, text } from '../../config/env-types';
import { apiKeyConnection, type ProviderDescriptor } from '../descriptor';
import { FAL_RESULT_LIFE_MS, FalClient } from './fal-client';
import { FAL_ERRORS } from './fal-errors';
import { FAL_MODELS } from './fal-models';

/**
 * fal.ai's queue (`POST https://queue.fal.run/{app}`, `Authorization: Key …`): FLUX and other apps,
 * one request for the `n` images (`num_images`), polled by the URLs the queue answers.
 */
export const FAL: ProviderDescriptor = {
  format: 'fal',
  title: "fal.ai's queue (`queue.fal.run/{app}`: FLUX apps; API key)",
  providers: ['fal'],
  credentials: { fields: [{ name: 'api_key', secret: true }], hintField: 'api_key' },
  // FAL_KEY is the name fal's own SDKs and docs read (fal-ai/fal-js libs/client/src/config.ts
  // credentialsFromEnv; fal.ai/docs "Authentication"): a key already exported for them works as it is.
  environment: {
    credentials: { api_key: 'FAL_KEY' },
    baseUrl: 'FAL_BASE_URL',
    variables: {
      FAL_KEY: declareVariable(text.optional(), {
        description: 'API key of fal.ai (`key_id:key_secret`; provider `fal`)',
        secret: true,
        field: 'providers.accounts.*.credentials.api_key',
        defaultText: 'none',
      }),
      FAL_BASE_URL: declareVariable(httpUrl.default('https://queue.fal.run'), { description: "base URL of fal.ai's queue" }),
    },
  },
  defaultBaseUrl: 'https://queue.fal.run',
  calls: 'one-for-n',
  // Generated files are served from fal's CDN: fal.media and its v2/v3/v3b subdomains
  // (fal.ai/docs/documentation/model-apis/media-expiration: "https://v3.fal.media/files/...").
  resultHosts: ['fal.media', '*.fal.media'],
  models: FAL_MODELS,
  // fal bills these apps per output megapixel, each image's rounded up ("Images are billed by rounding up to the
  // nearest megapixel", each app's page), and Kontext per image.
  catalog: [
    {
      model: 'fal-flux-dev',
      provider: 'fal',
      upstream_model: 'fal-ai/flux/dev',
      price: {
        currency: 'USD',
        source: 'https://fal.ai/models/fal-ai/flux/dev ($0.025 per megapixel, rounded up per image)',
        terms: [{ meter: 'output_megapixel', rate: 0.025 }],
      },
      default_size: '1024x1024',
    },
    {
      model: 'fal-flux-pro-1.1',
      provider: 'fal',
      upstream_model: 'fal-ai/flux-pro/v1.1',
      price: {
        currency: 'USD',
        source: 'https://fal.ai/models/fal-ai/flux-pro/v1.1 ($0.04 per megapixel, rounded up per image)',
        terms: [{ meter: 'output_megapixel', rate: 0.04 }],
      },
      default_size: '1024x1024',
    },
    {
      model: 'fal-flux-kontext-pro',
      provider: 'fal',
      upstream_model: 'fal-ai/flux-pro/kontext',
      price: { currency: 'USD', source: 'https://fal.ai/models/fal-ai/flux-pro/kontext ($0.04 per image)', terms: [{ meter: 'image', rate: 0.04 }] },
      default_size: '1024x1024',
    },
  ],
  errors: FAL_ERRORS,
  // The handle gives back the request's own status, response and cancel URLs (fal: "do not build these
  // URLs yourself"); fal keeps a completed request's result for 1 hour.
  resume: {
    holds: "the request's response_url (its status_url and cancel_url are it plus /status and /cancel), else the four fields as JSON",
    lifeMs: FAL_RESULT_LIFE_MS,
  },
  createClient(account, settings) {
    return new FalClient({
      ...apiKeyConnection(account, FAL, settings),
      pollIntervalMs: settings.pollIntervalMs,
    });
  },
};
