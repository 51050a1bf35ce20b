import { declareVariable, httpUrl, text } from '../../config/env-types';
import { apiKeyConnection, type DefaultCatalogRow, type ProviderDescriptor } from '../descriptor';
import { GeminiClient } from './gemini-client';
import { GEMINI_ERRORS } from './gemini-errors';
import { GEMINI_MODEL_SPECS } from './gemini-models';

const GEMINI_PRICING = 'https://ai.google.dev/gemini-api/docs/pricing (image output, per image by size tier)';

/** The Gemini API's public root (the official SDK's default base URL; the client adds `/v1beta`). */
const GEMINI_API = 'https://generativelanguage.googleapis.com';

/**
 * Google's Gemini image models over the Gemini API (`POST …/v1beta/models/{model}:generateContent`,
 * `x-goog-api-key`): one image per call, returned inline as base64.
 */
export const GEMINI: ProviderDescriptor = {
  format: 'gemini',
  title: "Google's Gemini API (`generateContent`: Gemini image models; API key)",
  providers: ['google'],
  credentials: { fields: [{ name: 'api_key', secret: true }], hintField: 'api_key' },
  // GEMINI_API_KEY is the name Google's Gemini API docs tell users to export (ai.google.dev
  // "Using Gemini API keys"), read by its SDKs. GOOGLE_API_KEY is left alone: the SDKs read it too (and
  // prefer it), but it is the generic name of keys for other Google APIs, which must not open a
  // billable Gemini account by accident.
  environment: {
    credentials: { api_key: 'GEMINI_API_KEY' },
    baseUrl: 'GEMINI_BASE_URL',
    variables: {
      GEMINI_API_KEY: declareVariable(text.optional(), {
        description: 'API key of the Gemini API (provider `google`, transport `gemini`)',
        secret: true,
        field: 'providers.accounts.*.credentials.api_key',
        defaultText: 'none',
      }),
      GEMINI_BASE_URL: declareVariable(httpUrl.default(GEMINI_API), {
        description: 'root URL of the Gemini API (`/v1beta` is added unless it ends with a version)',
      }),
    },
  },
  defaultBaseUrl: GEMINI_API,
  // No `n` upstream (candidateCount is 1 for the image models): one call per image.
  calls: 'one-per-image',
  // Images come back inline (base64), never as URLs to fetch.
  resultHosts: [],
  models: GEMINI_MODEL_SPECS,
  // Google's per-image prices by size tier (output tokens, a fixed count per tier, at the model's rate):
  // 2.5 Flash Image $0.039; 3 Pro Image $0.134 at 1K and 2K, $0.24 at 4K; 3.1 Flash Image $0.067 / $0.101 / $0.151.
  catalog: [
    {
      model: 'gemini-2.5-flash-image',
      provider: 'google',
      upstream_model: 'gemini-2.5-flash-image',
      price: { currency: 'USD', source: GEMINI_PRICING, terms: [{ meter: 'image', rate: 0.039 }] },
      default_size: '1024x1024',
    },
    // The largest output of the 1K and 2K tiers: the widest aspect ratio each model documents.
    byTier('gemini-3-pro-image', [0.134, 1200 * 896], [0.134, 2400 * 1792], 0.24),
    byTier('gemini-3.1-flash-image', [0.067, 384 * 3072], [0.101, 768 * 6144], 0.151),
  ],
  errors: GEMINI_ERRORS,
  createClient(account, settings) {
    return new GeminiClient(apiKeyConnection(account, GEMINI, settings));
  },
};

/** A catalog row priced by Google's size tiers: USD per image up to each tier's largest output, 4K the rest. */
function byTier(model: string, oneK: [usd: number, maxPixels: number], twoK: [usd: number, maxPixels: number], fourK: number): DefaultCatalogRow {
  return {
    model,
    provider: 'google',
    upstream_model: model,
    price: {
      currency: 'USD',
      source: GEMINI_PRICING,
      terms: [
        { meter: 'image', tier: '1K', max_pixels: oneK[1], rate: oneK[0] },
        { meter: 'image', tier: '2K', max_pixels: twoK[1], rate: twoK[0] },
        { meter: 'image', tier: '4K', rate: fourK },
      ],
    },
    default_size: '1024x1024',
  };
}
