import fs from 'node:fs';
import path from 'node:path';
import type { Request, Response } from 'express';
import { ACCESS_JWT_HEADER, type AccessJwtVerifier } from '../auth/access-jwt-auth';
import { ApiError } from '../errors/api-error';
import type { GatewayHandlers } from '../http/handler-maps';
import type { RawOperationHandler } from '../http/operation-types';

/**
 * The operator console's page and files (getConsole, getConsoleFile): what `npm run build` wrote
 * with Vite from console/ into dist/console. Everything comes from this origin: the CSP allows no
 * other, and no inline script or style.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  // Generated images are served by this gateway (signed /images URLs); data: for the empty favicon.
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Vite names every emitted file `<name>-<hash>.<ext>` (console/vite.config.ts): its content never changes. */
const HASHED_NAME = /-[A-Za-z0-9_-]{8}\.(js|css|svg|woff2)$/;
const INDEX = 'index.html';
/**
 * console/index.html's marker: "on" lets the console ask GET /admin/whoami with no token (the Access
 * sign-in); "off" keeps the signed-out page from sending a request that can only fail with 401.
 */
const ACCESS_SIGN_IN_OFF = '<meta name="access-sign-in" content="off" />';
const ACCESS_SIGN_IN_ON = '<meta name="access-sign-in" content="on" />';

/** dist/console under the repository's root, whether this file runs from src/ (tests) or dist/src/. */
export function defaultConsoleDirectory(): string {
  let at = __dirname;
  while (!fs.existsSync(path.join(at, 'package.json')) && path.dirname(at) !== at) at = path.dirname(at);
  return path.join(at, 'dist', 'console');
}

function sendFrom(directory: string, res: Response, file: string, cacheControl: string): Promise<void> {
  res.setHeader('Content-Security-Policy', CONSOLE_CSP);
  return new Promise((resolve, reject) => {
    // Only the headers the spec declares: no validators (the page is 0.5 KB; the other files never
    // change under their names), no ranges.
    const options = {
      root: directory,
      dotfiles: 'deny',
      cacheControl: false,
      lastModified: false,
      etag: false,
      acceptRanges: false,
      headers: { 'Cache-Control': cacheControl },
    } as const;
    res.sendFile(file, options, (error) => {
      if (error && !res.headersSent) reject(new ApiError('not_found', 'No such console file.'));
      else resolve();
    });
  });
}

/**
 * Access signs the operator in when CF_ACCESS_ADMIN_SCOPES is set and the page came through Access
 * (its JWT on the request, with no Authorization header): only then is whoami without a token worth asking.
 * The JWT is verified by that whoami call, not here.
 */
function mayUseAccess(req: Request, accessJwt: AccessJwtVerifier | undefined): boolean {
  return (accessJwt?.config.adminScopes.length ?? 0) > 0 && req.get(ACCESS_JWT_HEADER) !== undefined && req.get('authorization') === undefined;
}

async function sendPage(directory: string, req: Request, res: Response, accessJwt: AccessJwtVerifier | undefined): Promise<void> {
  let page: string;
  try {
    page = await fs.promises.readFile(path.join(directory, INDEX), 'utf8');
  } catch {
    throw new ApiError('not_found', 'The console is not built: run `npm run build`.');
  }
  res.setHeader('Content-Security-Policy', CONSOLE_CSP);
  // Always revalidated: it names the current build's hashed files.
  res.setHeader('Cache-Control', 'no-cache');
  res.type('html').send(mayUseAccess(req, accessJwt) ? page.replace(ACCESS_SIGN_IN_OFF, ACCESS_SIGN_IN_ON) : page);
}

export function consoleHandlers(
  directory = defaultConsoleDirectory(),
  accessJwt?: AccessJwtVerifier,
): { [Id in keyof Pick<GatewayHandlers, 'getConsole' | 'getConsoleFile'>]: RawOperationHandler } {
  return {
    getConsole: { raw: (req, res) => sendPage(directory, req, res, accessJwt) },
    getConsoleFile: {
      raw: async (req, res) => {
        const name = String(req.params.file);
        // A name without an extension is one of the console's pages (client-side routes).
        if (!name.includes('.')) return sendPage(directory, req, res, accessJwt);
        if (name === INDEX) return sendPage(directory, req, res, accessJwt);
        if (!HASHED_NAME.test(name)) throw new ApiError('not_found', 'No such console file.');
        await sendFrom(directory, res, name, 'public, max-age=31536000, immutable');
      },
    },
  };
}
