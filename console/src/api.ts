import createClient from 'openapi-fetch';
import type { components, paths } from '../../generated/gateway';

export type Schemas = components['schemas'];
export type AdminScope = Schemas['AdminScope'];

/**
 * The console is a client of the contract: every call goes through this client typed from
 * generated/gateway.ts, on the gateway's own origin. The credential is set by the session
 * (memory + sessionStorage), sent only in the Authorization header, never in a URL.
 */
let credential: string | undefined;

export function useCredential(value: string | undefined): void {
  credential = value;
}

export const api = createClient<paths>({ baseUrl: window.location.origin });
/** The single sign-on session's CSRF token: the one cookie of the session the console's script may read. */
function csrfToken(): string | undefined {
  const match = /(?:^|;\s*)__Host-cgw_csrf=([^;]+)/.exec(document.cookie);
  return match?.[1];
}

/** Whether a single sign-on session's cookies are here (its own cookie is HttpOnly: the CSRF one says so). */
export const hasSsoSession = (): boolean => csrfToken() !== undefined;

api.use({
  onRequest({ request }) {
    if (credential) request.headers.set('Authorization', `Bearer ${credential}`);
    else if (request.method !== 'GET' && request.method !== 'HEAD') {
      // A single sign-on session's cookie goes by itself; a state-changing call proves it came from this page.
      const token = csrfToken();
      if (token) request.headers.set('X-CSRF-Token', token);
    }
    return request;
  },
});

/** The error envelope's message (and code), or a generic line for a network failure. */
export function describeError(error: unknown, response?: Response): string {
  const envelope = error as { error?: { code?: string; message?: string } } | undefined;
  if (envelope?.error?.message) return `${envelope.error.message} (${envelope.error.code ?? response?.status ?? 'error'})`;
  if (response) return `The gateway answered ${response.status}.`;
  return error instanceof Error ? error.message : 'The request failed.';
}

/** Throws the envelope's message when a call failed; returns its data otherwise. */
export function dataOf<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || result.data === undefined) throw new Error(describeError(result.error, result.response));
  return result.data;
}
