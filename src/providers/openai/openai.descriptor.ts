import { declareVariable, httpUrl, text } from '../../config/env-types';
import { apiKeyConnection, type ProviderDescriptor } from '../descriptor';
import type { UpstreamModelSpec } from '../model-spec';
import { OPENAI_ERRORS, OpenAIImagesClient } from './openai-images-client';
import { OPENAI_IMAGE_MODELS, upstreamPrice } from './models';

/** The rows of models.ts as the gateway's size, input and calls rules (models.ts keeps the fields each endpoint takes). */
export const OPENAI_MODELS: readonly UpstreamModelSpec[] = OPENAI_IMAGE_MODELS.map((row) => ({
  match: row.model,
  family: row.model,
  sizes: { ...row.size_bounds, allowed_sizes: [...row.allowed_sizes] },
  // No seed: OpenAI's Images API has none (a GPT image model answers 400 to one).
  params: { image_options: row.image_options },
  ...(row.inputs ? { inputs: row.inputs } : {}),
  max_images_per_call: row.max_images_per_call,
  max_prompt_chars: row.max_prompt_chars,
}));

/**
 * OpenAI's own Images API (`POST /images/generations`, `POST /images/edits`): GPT image models and
 * dall-e-3, `n` in one call up to each model's limit (dall-e-3: one), every image answered as base64.
 */
export const OPENAI: ProviderDescriptor = {
  format: 'openai',
  title: "OpenAI's Images API (GPT image models, dall-e-3; API key)",
  providers: ['openai'],
  credentials: { fields: [{ name: 'api_key', secret: true }], hintField: 'api_key' },
  // OPENAI_API_KEY / OPENAI_BASE_URL are the names the official SDKs read (node_modules/openai/client.js).
  environment: {
    credentials: { api_key: 'OPENAI_API_KEY' },
    baseUrl: 'OPENAI_BASE_URL',
    variables: {
      OPENAI_API_KEY: declareVariable(text.optional(), {
        description: "API key of OpenAI's Images API (provider `openai`, transport `openai`)",
        secret: true,
        field: 'providers.accounts.*.credentials.api_key',
        defaultText: 'none',
      }),
      OPENAI_BASE_URL: declareVariable(httpUrl.default('https://api.openai.com/v1'), { description: "base URL of OpenAI's API" }),
    },
  },
  defaultBaseUrl: 'https://api.openai.com/v1',
  calls: 'one-for-n',
  // Every image comes back as base64 (dall-e-3 is asked for b64_json): no result host is fetched.
  resultHosts: [],
  models: OPENAI_MODELS,
  // Priced at OpenAI's per-image prices by quality and size (models.ts upstreamPrice); without a quality, the dearest.
  catalog: OPENAI_IMAGE_MODELS.map((row) => ({
    model: row.model,
    provider: 'openai',
    upstream_model: row.model,
    price: upstreamPrice(row),
    default_size: '1024x1024',
  })),
  modelIds: /^(gpt-image-|dall-e-)/,
  errors: OPENAI_ERRORS,
  createClient(account, settings) {
    return new OpenAIImagesClient(apiKeyConnection(account, OPENAI, settings));
  },
};
