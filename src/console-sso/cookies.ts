/**
 * The console's cookies. `__Host-` names make the browser refuse them unless Secure, on this host
 * only, for every path (the admin API is outside /console).
 */
export const SESSION_COOKIE = '__Host-cgw_session';
/** The CSRF token, readable by the console's script, which sends it back as X-CSRF-Token. */
export const CSRF_COOKIE = '__Host-cgw_csrf';
/** Ties a sign-in's callback to the browser that started it. Lax: the issuer's redirect back is a cross-site navigation. */
export const SIGN_IN_COOKIE = '__Host-cgw_sso';

/** One cookie's value from a Cookie header, or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

export function setCookie(name: string, value: string, options: { maxAgeSeconds: number; httpOnly: boolean; sameSite: 'Strict' | 'Lax' }): string {
  return `${name}=${value}; Path=/; Max-Age=${options.maxAgeSeconds}; ${options.httpOnly ? 'HttpOnly; ' : ''}Secure; SameSite=${options.sameSite}`;
}

export const clearCookie = (name: string, sameSite: 'Strict' | 'Lax' = 'Strict'): string => setCookie(name, '', { maxAgeSeconds: 0, httpOnly: true, sameSite });
