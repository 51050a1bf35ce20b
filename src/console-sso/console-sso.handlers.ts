import type { Request, Response } from 'express';
import { gatewayOperations } from '../../generated/gateway.operations';
import type { AdminPrincipal } from '../auth/principal';
import { ApiError } from '../errors/api-error';
import type { GatewayHandlers } from '../http/handler-maps';
import type { RawOperationHandler } from '../http/operation-types';
import type { ConsoleSso } from './console-sso.service';
import { CSRF_COOKIE, SESSION_COOKIE, SIGN_IN_COOKIE, clearCookie, cookieValue, setCookie } from './cookies';

type SsoHandlers = Pick<GatewayHandlers, 'listConsoleSsoIssuers' | 'startConsoleSignIn' | 'completeConsoleSignIn' | 'signOutConsoleSession'>;

/** Seconds the sign-in cookie lives: as long as the state it carries. */
const SIGN_IN_COOKIE_SECONDS = 600;

const notConfigured = (): ApiError => new ApiError('not_found', 'Console single sign-on is not configured (CONSOLE_OIDC_ISSUERS).');

/**
 * The console's single sign-on operations. Raw handlers: they answer redirects and set several
 * cookies. The origin of the redirect URIs is PUBLIC_BASE_URL, else the request's own.
 */
export function consoleSsoHandlers(
  sso: ConsoleSso | undefined,
  publicBaseUrl: string | undefined,
): { [Id in keyof SsoHandlers]: SsoHandlers[Id] | RawOperationHandler } {
  const originOf = (req: Request): string => publicBaseUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`;
  const auditOf = (req: Request, res: Response) => ({ requestId: String(res.locals.requestId), clientIp: req.socket.remoteAddress ?? '' });
  return {
    listConsoleSsoIssuers: () => ({
      status: 200,
      body: {
        data: (sso?.list() ?? []).map(({ id, name }) => ({
          id,
          name,
          sign_in_path: gatewayOperations.startConsoleSignIn.path.replace('{issuer}', id),
        })),
      },
    }),
    startConsoleSignIn: {
      raw: async (req, res) => {
        if (!sso) throw notConfigured();
        const started = await sso.begin(String(req.params.issuer), originOf(req));
        res.setHeader('Set-Cookie', setCookie(SIGN_IN_COOKIE, started.state, { maxAgeSeconds: SIGN_IN_COOKIE_SECONDS, httpOnly: true, sameSite: 'Lax' }));
        res.status(302).setHeader('Location', started.location).end();
      },
    },
    completeConsoleSignIn: {
      raw: async (req, res) => {
        if (!sso) throw notConfigured();
        const query = new URL(req.originalUrl, 'http://callback').searchParams;
        // The sign-in cookie goes whatever the outcome: its state is used up.
        res.setHeader('Set-Cookie', clearCookie(SIGN_IN_COOKIE, 'Lax'));
        const signedIn = await sso.complete(query, cookieValue(req.get('cookie'), SIGN_IN_COOKIE), auditOf(req, res));
        const lifetime = { maxAgeSeconds: signedIn.maxAgeSeconds, sameSite: 'Strict' } as const;
        res.setHeader('Set-Cookie', [
          clearCookie(SIGN_IN_COOKIE, 'Lax'),
          setCookie(SESSION_COOKIE, signedIn.sessionToken, { ...lifetime, httpOnly: true }),
          setCookie(CSRF_COOKIE, signedIn.csrfToken, { ...lifetime, httpOnly: false }),
        ]);
        res.status(303).setHeader('Location', gatewayOperations.getConsole.path).end();
      },
    },
    signOutConsoleSession: {
      raw: async (req, res) => {
        const principal = res.locals.principal as AdminPrincipal;
        if (!sso || !principal.session) throw notConfigured();
        const endSessionUrl = await sso.signOut(principal.session.sessionId, originOf(req), { ...auditOf(req, res), actor: principal.actor });
        res.setHeader('Set-Cookie', [clearCookie(SESSION_COOKIE), clearCookie(CSRF_COOKIE)]);
        res.status(200).json({ end_session_url: endSessionUrl });
      },
    },
  };
}
