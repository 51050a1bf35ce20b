import type { Request } from 'express';
import type { Kysely } from 'kysely';
import { ALL_ADMIN_SCOPES, type AdminScope, adminTokenSecrets, inactiveTokenError, insufficientScope } from '../admin-tokens/admin-token.model';
import { findAdminTokenByHash } from '../admin-tokens/admin-tokens.repository';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { hashKey } from '../keys/key-secret';
import type { Clock } from '../shared/clock';
import { bearerToken, secretsEqual } from './credentials';
import type { AdminPrincipal } from './principal';

const ADMIN_TOKEN_PREFIX = 'hyadm_';

/**
 * The `AdminSecret` scheme. The admin secret is the root and holds every scope; an admin token
 * (`hyadm_...`) must be well-formed, known, not revoked, not expired (each its own 401) and hold
 * the scopes the operation's requirement names (403 `insufficient_scope`). Client keys never open it.
 * Read from the database on every request, uncached: a revocation holds on every replica at once.
 * A token's lineage needs no walk here: a child's expiry is capped at its parent's and revoking a
 * token revokes its descendants (AdminTokensService), so the row alone says whether it is usable.
 */
export function adminGuard(deps: {
  adminSecret: string;
  db: Kysely<Database>;
  clock: Clock;
}): (req: Request, scopes: readonly string[]) => Promise<AdminPrincipal> {
  return async (req, scopes) => {
    const token = bearerToken(req.get('authorization'));
    if (token !== undefined && secretsEqual(token, deps.adminSecret))
      return { kind: 'admin', credential: 'admin_secret', actor: 'root', scopes: ALL_ADMIN_SCOPES };
    if (token === undefined || !token.startsWith(ADMIN_TOKEN_PREFIX)) {
      throw new ApiError('invalid_admin_secret', 'Send the admin secret as Authorization: Bearer <ADMIN_SECRET>.');
    }
    const row = adminTokenSecrets.isWellFormed(token) ? await findAdminTokenByHash(deps.db, hashKey(token)) : undefined;
    if (!row) throw new ApiError('invalid_admin_token', 'The admin token is malformed or unknown.');
    const inactive = inactiveTokenError(row, deps.clock.now());
    if (inactive) throw inactive;
    const held = JSON.parse(row.scopes) as AdminScope[];
    const lacking = scopes.find((scope) => !(held as readonly string[]).includes(scope));
    if (lacking !== undefined) throw insufficientScope(lacking, 'use');
    return { kind: 'admin', credential: 'admin_token', actor: row.id, scopes: held };
  };
}
