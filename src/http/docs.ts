import { Router } from 'express';
import type { RawOperationHandler } from './operation-types';

const SCALAR_BUNDLE = require.resolve('@scalar/api-reference/browser/standalone.js');

/**
 * The one place routes exist outside the specs: static assets. Scalar's browser bundle comes from
 * node_modules (no CDN).
 */
export const STATIC_ASSETS_PREFIX = '/docs';
const SCALAR_BUNDLE_URL = `${STATIC_ASSETS_PREFIX}/scalar.js`;

export function staticAssetsRouter(): Router {
  return Router().get(SCALAR_BUNDLE_URL.slice(STATIC_ASSETS_PREFIX.length), (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.sendFile(SCALAR_BUNDLE);
  });
}

/**
 * The Scalar API reference page (operations getApiReference / getCreativeApiReference), fully
 * offline: local script, no remote fonts, and none of Scalar's hosted features. On a loopback
 * address Scalar turns on its "Ask AI" agent (which searches api.scalar.com through
 * proxy.scalar.com) and its developer toolbar ("Share" and "Deploy" upload the spec to scalar.com);
 * our CSP would block those calls and leave dead buttons.
 */
export function docsPageHandler(options: { title: string } & ({ specUrl: string } | { document: object })): RawOperationHandler {
  return {
    raw: async (req, res, next) => {
      // Scalar's express integration is an ES module; load it lazily from CommonJS.
      const { apiReference } = await import('@scalar/express-api-reference');
      res.setHeader(
        'Content-Security-Policy',
        "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'",
      );
      res.setHeader('Cache-Control', 'no-cache');
      apiReference({
        ...('specUrl' in options ? { url: options.specUrl } : { content: options.document }),
        cdn: SCALAR_BUNDLE_URL,
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
