import type { Request } from 'express';
import { CSRF_HEADER, type ConsoleSso } from '../console-sso/console-sso.service';
import { SESSION_COOKIE, cookieValue } from '../console-sso/cookies';
import { ApiError } from '../errors/api-error';
import type { AdminPrincipal } from './principal';

/** Fetch sites a browser may send a cookie-authenticated admin request from (not another site's page). */
const SAME_SITE_FETCHES = new Set(['same-origin', 'none']);

/** "Not my credential": the other alternatives of the requirement answer (a `missing_` code marks it so). */
const declined = (): ApiError => new ApiError('missing_service_token', 'No console session cookie to use as an admin credential.');

/**
 * The `ConsoleSession` scheme: the console's single sign-on session cookie, on a request without an
 * Authorization header (a token typed into the console acts as itself). The cookie is ambient, so
 * besides its SameSite=Strict a request another site's page made is refused (Sec-Fetch-Site), and a
 * state-changing one must carry the session's CSRF token (ConsoleSso.authenticate).
 */
export function consoleSessionGuard(deps: { sso: ConsoleSso | undefined }): (req: Request, scopes: readonly string[]) => Promise<AdminPrincipal> {
  return async (req, scopes) => {
    const token = cookieValue(req.get('cookie'), SESSION_COOKIE);
    if (!deps.sso || !token || req.get('authorization') !== undefined) throw declined();
    const fetchSite = req.get('sec-fetch-site');
    if (fetchSite !== undefined && !SAME_SITE_FETCHES.has(fetchSite)) {
      throw new ApiError('invalid_console_session', "A console session is an admin credential only on requests from the gateway's own pages.");
    }
    return deps.sso.authenticate(token, { method: req.method, csrfToken: req.get(CSRF_HEADER) }, scopes);
  };
}
