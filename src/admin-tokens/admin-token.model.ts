import type { components } from '../../generated/gateway';
import type { AdminTokensTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { prefixedSecretFormat } from '../keys/key-secret';
import { toIso, toIsoOrNull } from '../shared/clock';

export type AdminScope = components['schemas']['AdminScope'];
export type AdminTokenResource = components['schemas']['AdminToken'];
export type AdminTokenStatus = components['schemas']['AdminTokenStatus'];

/** `hyadm_` + 30 random base62 + 6 checksum, like client keys; only the SHA-256 is stored. */
export const adminTokenSecrets = prefixedSecretFormat('hyadm_');

/** Every scope, as the spec's AdminScope enum publishes them: the admin secret holds all of them. */
export const ALL_ADMIN_SCOPES: readonly AdminScope[] = [
  'keys:read',
  'keys:write',
  'channels:read',
  'channels:write',
  'generations:read',
  'generations:write',
  'webhooks:read',
  'webhooks:write',
  'audit:read',
  'usage:read',
  'tokens:write',
  'projects:read',
  'projects:write',
];

export function adminTokenStatus(row: AdminTokensTable, now: number): AdminTokenStatus {
  if (row.revoked_at !== null) return 'revoked';
  if (row.expires_at !== null && row.expires_at <= now) return 'expired';
  return 'active';
}

/** 401 for a token that is no longer usable (revoked or expired), undefined while it is active. */
export function inactiveTokenError(row: AdminTokensTable, now: number): ApiError | undefined {
  const status = adminTokenStatus(row, now);
  if (status === 'revoked') return new ApiError('admin_token_revoked', 'This admin token has been revoked.');
  if (status === 'expired') return new ApiError('admin_token_expired', `This admin token expired at ${toIso(row.expires_at as number)}.`);
  return undefined;
}

export function toAdminTokenResource(row: AdminTokensTable, now: number): AdminTokenResource {
  return {
    id: row.id,
    name: row.name,
    hint: row.hint,
    scopes: JSON.parse(row.scopes) as AdminScope[],
    status: adminTokenStatus(row, now),
    created_by: row.created_by,
    expires_at: toIsoOrNull(row.expires_at),
    created_at: toIso(row.created_at),
    revoked_at: toIsoOrNull(row.revoked_at),
  };
}

/**
 * 403 naming the scope: `use` = the operation needs it; `grant` = a token tried to hand out a scope
 * it lacks; `revoke` = a token tried to revoke a token holding a scope it lacks.
 */
export function insufficientScope(scope: string, reason: 'use' | 'grant' | 'revoke'): ApiError {
  const messages = {
    use: `This admin token lacks the scope ${scope}.`,
    grant: `This admin token lacks the scope ${scope}, so it cannot grant it.`,
    revoke: `This admin token lacks the scope ${scope}, so it cannot revoke a token holding it.`,
  };
  return new ApiError('insufficient_scope', messages[reason], { details: { scope } });
}

/** A child never outlives its parent: its expiry is the earlier of the one asked for and the parent's. */
export function boundedExpiry(requested: number | null, parentExpiresAt: number | null): number | null {
  if (parentExpiresAt === null) return requested;
  return requested === null ? parentExpiresAt : Math.min(requested, parentExpiresAt);
}
