import type { Request } from 'express';
import { insufficientScope } from '../admin-tokens/admin-token.model';
import { ApiError } from '../errors/api-error';
import { ACCESS_JWT_HEADER, type AccessJwtVerifier } from './access-jwt-auth';
import type { AdminPrincipal } from './principal';

/** Fetch sites a browser may send an Access-authenticated admin request from (not another site's page). */
const SAME_SITE_FETCHES = new Set(['same-origin', 'none']);
/** Audit events store the actor in 200 characters. */
const MAX_ACTOR_LENGTH = 200;

/** "Not my credential": the other alternative of the requirement (AdminSecret) answers. */
const declined = (): ApiError => new ApiError('missing_service_token', 'No Cloudflare Access JWT to use as an admin credential.');

/**
 * The `AdminAccessJwt` scheme: when CF_ACCESS_ADMIN_SCOPES is set, a request with no Authorization
 * header and a valid Access JWT for CF_ACCESS_ADMIN_AUD is an admin with exactly those scopes (the
 * console behind Access). An Authorization header always wins, so a token typed into the console
 * is what acts. The edge derives the JWT from a cookie, an ambient credential: a browser request
 * another site's page made (Sec-Fetch-Site cross-site or same-site) is refused, against CSRF.
 */
export function adminAccessJwtGuard(deps: { verifier: AccessJwtVerifier | undefined }): (req: Request, scopes: readonly string[]) => Promise<AdminPrincipal> {
  return async (req, scopes) => {
    const token = req.get(ACCESS_JWT_HEADER);
    const granted = deps.verifier?.config.adminScopes ?? [];
    if (!deps.verifier || granted.length === 0 || !token || req.get('authorization') !== undefined) throw declined();
    const fetchSite = req.get('sec-fetch-site');
    if (fetchSite !== undefined && !SAME_SITE_FETCHES.has(fetchSite)) {
      throw new ApiError('invalid_access_jwt', "A Cloudflare Access JWT is an admin credential only on requests from the gateway's own pages.");
    }
    const identity = await deps.verifier.verify(token, deps.verifier.config.adminAudiences);
    const actor = `access:${identity.name}`;
    if (actor.length > MAX_ACTOR_LENGTH) throw new ApiError('invalid_access_jwt', 'The Cf-Access-Jwt-Assertion is not valid here: its email is too long.');
    const lacking = scopes.find((scope) => !(granted as readonly string[]).includes(scope));
    if (lacking !== undefined) throw insufficientScope(lacking, 'use');
    return { kind: 'admin', credential: 'access', actor, scopes: granted, access: identity };
  };
}
