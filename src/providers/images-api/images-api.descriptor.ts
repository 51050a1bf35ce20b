import { declareVariable, httpUrl, providerName, text } from '../../config/env-types';
import { apiKeyConnection, type ProviderDescriptor } from '../descriptor';
import type { ErrorRule } from '../error-table';
import { ImagesApiClient } from './images-api-client';

/** OpenAI's error codes (platform.openai.com/docs/guides/error-codes), read from `error.code` or `error.type`. */
export const IMAGES_API_ERRORS: readonly ErrorRule[] = [
  { codes: ['content_policy_violation', 'moderation_blocked'], kind: 'content' },
  { codes: ['invalid_api_key', 'account_deactivated', 'billing_not_active', 'insufficient_quota'], kind: 'account' },
  { codes: ['rate_limit_exceeded'], kind: 'busy' },
];

/**
 * A generic OpenAI-compatible `POST {base}/images/generations` (operators' own servers and
 * resellers): the operator names the provider (OPENAI_COMPAT_PROVIDER_NAME) and lists its models
 * in the catalog; `n` goes in one call.
 */
export const IMAGES_API: ProviderDescriptor = {
  format: 'images-api',
  title: 'an OpenAI-compatible images API (`POST /images/generations`; API key)',
  providers: [],
  generic: true,
  credentials: { fields: [{ name: 'api_key', secret: true }], hintField: 'api_key' },
  environment: {
    credentials: { api_key: 'OPENAI_COMPAT_API_KEY' },
    baseUrl: 'OPENAI_COMPAT_BASE_URL',
    providerName: 'OPENAI_COMPAT_PROVIDER_NAME',
    variables: {
      OPENAI_COMPAT_BASE_URL: declareVariable(httpUrl.optional(), {
        description: 'base URL of an OpenAI-compatible images API, with `OPENAI_COMPAT_API_KEY`',
        defaultText: 'none',
      }),
      OPENAI_COMPAT_API_KEY: declareVariable(text.optional(), {
        description: 'API key of the OpenAI-compatible upstream, with `OPENAI_COMPAT_BASE_URL`',
        secret: true,
        field: 'providers.accounts.*.credentials.api_key',
        defaultText: 'none',
      }),
      OPENAI_COMPAT_PROVIDER_NAME: declareVariable(providerName.default('openai-compatible'), {
        description: 'provider name of the OpenAI-compatible upstream (not a built-in one such as `openai`); add its models to `MODEL_CATALOG`',
      }),
    },
  },
  calls: 'one-for-n',
  resultHosts: [],
  models: [],
  errors: IMAGES_API_ERRORS,
  createClient(account, settings) {
    return new ImagesApiClient({
      ...apiKeyConnection(account, IMAGES_API, settings),
      oneImagePerCall: false,
      models: [],
      errors: IMAGES_API_ERRORS,
    });
  },
};
