import type { components } from '../../generated/gateway';

export type ErrorCode = components['schemas']['ErrorCode'];
export type ErrorType = components['schemas']['Error']['error']['type'];

/**
 * The one table that maps every error code to its HTTP status and OpenAI-style type.
 * `test/contract/error-codes.test.ts` checks it against the spec.
 */
export const ERROR_CODES: Record<ErrorCode, { status: number; type: ErrorType }> = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  content_policy_violation: { status: 400, type: 'invalid_request_error' },
  missing_api_key: { status: 401, type: 'authentication_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  key_disabled: { status: 401, type: 'authentication_error' },
  key_expired: { status: 401, type: 'authentication_error' },
  invalid_admin_secret: { status: 401, type: 'authentication_error' },
  missing_service_token: { status: 401, type: 'authentication_error' },
  invalid_service_token: { status: 403, type: 'permission_error' },
  quota_exceeded: { status: 402, type: 'quota_error' },
  provider_not_allowed: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'not_found_error' },
  key_not_found: { status: 404, type: 'not_found_error' },
  model_not_found: { status: 404, type: 'not_found_error' },
  generation_not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  idempotency_key_in_use: { status: 409, type: 'invalid_request_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  output_moderated: { status: 422, type: 'invalid_request_error' },
  idempotency_key_reused: { status: 422, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'api_error' },
  provider_error: { status: 502, type: 'provider_error' },
  provider_unavailable: { status: 503, type: 'provider_error' },
  provider_busy: { status: 503, type: 'provider_error' },
  not_ready: { status: 503, type: 'api_error' },
  dependency_unavailable: { status: 503, type: 'api_error' },
  provider_timeout: { status: 504, type: 'provider_error' },
  insufficient_scope: { status: 403, type: 'permission_error' },
  invalid_admin_token: { status: 401, type: 'authentication_error' },
  admin_token_revoked: { status: 401, type: 'authentication_error' },
  admin_token_expired: { status: 401, type: 'authentication_error' },
  admin_token_not_found: { status: 404, type: 'not_found_error' },
  invalid_access_jwt: { status: 401, type: 'authentication_error' },
  access_jwks_unavailable: { status: 503, type: 'api_error' },
  invalid_signature: { status: 403, type: 'permission_error' },
  image_not_found: { status: 404, type: 'not_found_error' },
  image_expired: { status: 410, type: 'not_found_error' },
  range_not_satisfiable: { status: 416, type: 'invalid_request_error' },
  image_storage_unavailable: { status: 503, type: 'api_error' },
  channel_not_found: { status: 404, type: 'not_found_error' },
  channel_read_only: { status: 409, type: 'invalid_request_error' },
  ip_not_allowed: { status: 403, type: 'permission_error' },
  model_not_allowed: { status: 403, type: 'permission_error' },
  concurrency_limited: { status: 429, type: 'rate_limit_error' },
  webhook_endpoint_not_found: { status: 404, type: 'not_found_error' },
};
