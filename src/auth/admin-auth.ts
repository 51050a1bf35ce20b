import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { ApiError } from '../errors/api-error';
import type { AdminPrincipal } from './principal';

/** Bearer token from an Authorization header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Constant-time equality for secrets of any length (compares SHA-256 digests). */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The `AdminSecret` scheme: only the admin secret opens it; client keys never do. */
export function adminSecretGuard(adminSecret: string): (req: Request) => AdminPrincipal {
  return (req) => {
    const token = bearerToken(req.get('authorization'));
    if (token === undefined || !secretsEqual(token, adminSecret)) {
      throw new ApiError('invalid_admin_secret', 'Send the admin secret as Authorization: Bearer <ADMIN_SECRET>.');
    }
    return { kind: 'admin', actor: 'root' };
  };
}
