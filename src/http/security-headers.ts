import type { Response } from 'express';

/** Conservative headers for a JSON API; /docs relaxes the CSP for its own script. */
export const SECURITY_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Referrer-Policy', 'no-referrer'],
  ['Cache-Control', 'no-store'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
];

export function setSecurityHeaders(res: Response): void {
  for (const [name, value] of SECURITY_HEADERS) res.setHeader(name, value);
}
