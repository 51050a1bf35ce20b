import { ApiError } from '../errors/api-error';
import { DAY_MS } from './clock';
import { parseTimestamp } from './rfc3339';

/** `expires_at` as epoch ms; it must lie in the future. */
export function futureExpiry(expiresAt: string, now: number): number {
  const at = parseTimestamp(expiresAt, 'expires_at');
  if (!(at > now)) throw new ApiError('invalid_request', 'expires_at must be in the future.', { param: 'expires_at' });
  return at;
}

/** The expiry a create request asks for (`expires_at` or `expires_in_days`, not both), or null for none. */
export function requestedExpiry(input: { expires_at?: string; expires_in_days?: number }, now: number): number | null {
  if (input.expires_at !== undefined && input.expires_in_days !== undefined) {
    throw new ApiError('invalid_request', 'Give expires_at or expires_in_days, not both.', { param: 'expires_at' });
  }
  if (input.expires_at !== undefined) return futureExpiry(input.expires_at, now);
  if (input.expires_in_days !== undefined) return now + input.expires_in_days * DAY_MS;
  return null;
}
