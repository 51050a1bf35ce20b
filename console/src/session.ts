import { type AdminScope, type Schemas, api, dataOf, useCredential } from './api';

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
 * The session this tab signed in earlier, if its token still works; else, behind Cloudflare Access
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
      signOut();
    }
  }
  return accessSession();
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

export function signOut(): void {
  sessionStorage.removeItem(STORAGE_KEY);
  useCredential(undefined);
}
