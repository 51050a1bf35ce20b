import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { type Request, Router } from 'express';
import type { CidrSet } from '../shared/cidr';
import { type OpenApiDocument, withServerDefaults } from './openapi-document';
import type { RawOperationHandler } from './operation-types';
import { originVary, requestOrigin } from './request-origin';

const SCALAR_BUNDLE_FILE = require.resolve('@scalar/api-reference/browser/standalone.js');

/**
 * The one place routes exist outside the specs: static assets. Scalar's browser bundle comes from
 * node_modules (no CDN).
 */
export const STATIC_ASSETS_PREFIX = '/docs';
const SCALAR_BUNDLE_PATH = '/scalar.js';

type Encoding = 'br' | 'gzip';

const ENCODERS: Record<Encoding, (body: Buffer) => Promise<Buffer>> = {
  // Quality 5: about gzip's speed and a tenth smaller; 11 takes seconds on 3.5 MB.
  br: (body) =>
    promisify(zlib.brotliCompress)(body, {
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length },
    }),
  gzip: (body) => promisify(zlib.gzip)(body, { level: 9 }),
};

/** A static asset, its content version, and its compressed forms, each made once per process. */
class StaticAsset {
  readonly version: string;
  private readonly encoded = new Map<Encoding, Promise<Buffer>>();

  constructor(readonly body: Buffer) {
    this.version = createHash('sha256').update(body).digest('hex').slice(0, 16);
  }

  encodedAs(encoding: Encoding): Promise<Buffer> {
    let found = this.encoded.get(encoding);
    if (!found) {
      found = ENCODERS[encoding](this.body);
      this.encoded.set(encoding, found);
    }
    return found;
  }
}

let scalarBundle: StaticAsset | undefined;
function scalar(): StaticAsset {
  scalarBundle ??= new StaticAsset(fs.readFileSync(SCALAR_BUNDLE_FILE));
  return scalarBundle;
}

/** The bundle's URL, versioned by its content: the only URL the browser may keep for a year. */
export function scalarBundleUrl(): string {
  return `${STATIC_ASSETS_PREFIX}${SCALAR_BUNDLE_PATH}?v=${scalar().version}`;
}

/**
 * Compressed as the client's `Accept-Encoding` prefers (brotli, gzip, or none). At the versioned
 * URL it is immutable for a year; at any other the browser revalidates.
 */
export function staticAssetsRouter(): Router {
  return Router().get(SCALAR_BUNDLE_PATH, async (req, res, next) => {
    try {
      const asset = scalar();
      const encoding = req.acceptsEncodings('br', 'gzip', 'identity');
      const body = encoding === 'br' || encoding === 'gzip' ? await asset.encodedAs(encoding) : asset.body;
      res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
      res.setHeader('Vary', 'Accept-Encoding');
      res.setHeader('Cache-Control', req.query.v === asset.version ? 'public, max-age=31536000, immutable' : 'no-cache');
      if (encoding === 'br' || encoding === 'gzip') res.setHeader('Content-Encoding', encoding);
      res.setHeader('Content-Length', body.length);
      res.end(body);
    } catch (error) {
      next(error);
    }
  });
}

/**
 * A served OpenAPI document (operations getOpenApiDocument / getCreativeOpenApiDocument, and the
 * internal reference page that embeds it): the loaded one with its server defaults set to where
 * the request came to. Not to be cached across hosts.
 */
export function documentForRequest(document: OpenApiDocument, trustedProxies: CidrSet | undefined) {
  return (request: { header(name: string): string | undefined; peer: string | undefined }) => ({
    document: withServerDefaults(document, requestOrigin(request, trustedProxies)),
    headers: { 'Cache-Control': 'no-cache', Vary: originVary(trustedProxies) },
  });
}

/** What documentForRequest() reads of an Express request. */
export function originRequest(req: Request): { header(name: string): string | undefined; peer: string | undefined } {
  return { header: (name) => req.get(name), peer: req.socket.remoteAddress };
}

/**
 * The Scalar API reference page (operations getApiReference / getCreativeApiReference), fully
 * offline: local script, no remote fonts, and none of Scalar's hosted features. On a loopback
 * address Scalar turns on its "Ask AI" agent (which searches api.scalar.com through
 * proxy.scalar.com) and its developer toolbar ("Share" and "Deploy" upload the spec to scalar.com);
 * our CSP would block those calls and leave dead buttons.
 */
export function docsPageHandler(options: { title: string } & ({ specUrl: string } | { document: ReturnType<typeof documentForRequest> })): RawOperationHandler {
  return {
    raw: async (req, res, next) => {
      // Scalar's express integration is an ES module; load it lazily from CommonJS.
      const { apiReference } = await import('@scalar/express-api-reference');
      res.setHeader(
        'Content-Security-Policy',
        "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'",
      );
      res.setHeader('Cache-Control', 'no-cache');
      let source: { url: string } | { content: object };
      if ('specUrl' in options) source = { url: options.specUrl };
      else {
        const served = options.document(originRequest(req));
        for (const [name, value] of Object.entries(served.headers)) res.setHeader(name, value);
        source = { content: served.document };
      }
      apiReference({
        ...source,
        cdn: scalarBundleUrl(),
        pageTitle: options.title,
        withDefaultFonts: false,
        hideClientButton: true,
        telemetry: false,
        agent: { disabled: true },
        showDeveloperTools: 'never',
        // No request for /favicon.ico (a 404 in the console).
        favicon: 'data:,',
      } as Parameters<typeof apiReference>[0])(req as never, res, next);
    },
  };
}
