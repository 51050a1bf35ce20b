import { ApiError } from '../../errors/api-error';
import { toIso } from '../../shared/clock';
import type { KeyRefusal } from './key-usability';

/**
 * The answer to a request whose key may not be used (key-usability.ts says why): the guard's and
 * the reservation's, worded once. `unknown`: no key has the secret's hash (or its shape is wrong).
 */
export function keyRefused(refusal: KeyRefusal | 'unknown', key?: { expires_at: number | null }): ApiError {
  switch (refusal) {
    case 'unknown':
    case 'rotated':
      return new ApiError('invalid_api_key', 'The API key is malformed or unknown.');
    case 'disabled':
      return new ApiError('key_disabled', 'This API key has been disabled.');
    case 'expired':
      return new ApiError('key_expired', `This API key expired at ${toIso(key?.expires_at as number)}.`);
  }
}
