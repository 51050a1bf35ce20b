import { type AdminScope, type Schemas, api, dataOf, hasSsoSession, useCredential } from './api';

const STORAGE_KEY = 'creative-gateway.console.admin-token';

export interface Session {
  identity: Schemas['AdminIdentity'];
  /** What the scopes allow; the server enforces them anyway. */
  can(scope: AdminScope): boolean;
}

function sessionOf(identity: Schemas['AdminIdentity']): Session {
  const held = new Set<string>(identity.scopes);
  return { identity, can: (scope) => held.has(scope) };
}

/** Checks the token with GET /admin/whoami and keeps it for this tab only (sessionStorage). */
export async function signIn(token: string): Promise<Session> {
  useCredential(token);
  try {
    const identity = dataOf(await api.GET('/admin/whoami'));
    sessionStorage.setItem(STORAGE_KEY, token);
    return sessionOf(identity);
  } catch (error) {
    useCredential(undefined);
    throw error;
  }
}

/**
 * The session this tab signed in earlier, if its token still works; else a single sign-on session
 * (its cookies: whoami with no token); else, behind Cloudflare Access
 * with CF_ACCESS_ADMIN_SCOPES set, the Access identity (whoami with no token: the edge adds the JWT).
 * Nothing is stored for Access: the edge's cookie is the credential. The gateway marks the page when
 * Access may sign in (console.handlers.ts); otherwise that whoami could only fail, so it is not sent.
 */
export async function resumeSession(): Promise<Session | undefined> {
  const stored = sessionStorage.getItem(STORAGE_KEY);
  if (stored) {
    try {
      return await signIn(stored);
    } catch {
      forgetToken();
    }
  }
  return (await ssoSession()) ?? accessSession();
}

async function ssoSession(): Promise<Session | undefined> {
  if (!hasSsoSession()) return undefined;
  try {
    const { data } = await api.GET('/admin/whoami');
    return data?.kind === 'console_session' ? sessionOf(data) : undefined;
  } catch {
    return undefined;
  }
}

/** The single sign-on issuers the gateway offers (none without CONSOLE_OIDC_ISSUERS). */
export async function ssoIssuers(): Promise<Schemas['ConsoleSsoIssuer'][]> {
  try {
    return (await api.GET('/console/sso/issuers')).data?.data ?? [];
  } catch {
    return [];
  }
}

const accessMaySignIn = () => document.querySelector('meta[name="access-sign-in"]')?.getAttribute('content') === 'on';

async function accessSession(): Promise<Session | undefined> {
  if (!accessMaySignIn()) return undefined;
  try {
    const { data } = await api.GET('/admin/whoami');
    return data?.kind === 'access' ? sessionOf(data) : undefined;
  } catch {
    return undefined;
  }
}

function forgetToken(): void {
  sessionStorage.removeItem(STORAGE_KEY);
  useCredential(undefined);
}

/**
 * Forgets the token; a single sign-on session is ended at the gateway (every replica) and then at
 * its issuer, where the browser is sent (it comes back to the console signed out).
 */
export async function signOut(session: Session): Promise<void> {
  forgetToken();
  if (session.identity.kind !== 'console_session') return;
  const { data } = await api.POST('/console/sso/sign-out');
  if (data?.end_session_url) window.location.assign(data.end_session_url);
}
