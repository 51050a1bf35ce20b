import type { Express } from 'express';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { type AccessJwtVerifier, accessJwtGuard } from '../auth/access-jwt-auth';
import { serviceTokenGuard } from '../auth/service-token-auth';
import type { ServiceToken } from '../config/config';
import type { Database } from '../db/schema';
import { errorHandler } from '../errors/error-handler';
import type { GenerationService } from '../generation/generation.service';
import { healthHandlers } from '../health/health.handlers';
import type { ReadinessService } from '../health/readiness';
import { createBaseApp, jsonBody } from '../http/base-app';
import { imageInputsSupport } from '../images/inputs/multipart-body';
import { docsPageHandler, documentForRequest } from '../http/docs';
import type { CreativeHandlers } from '../http/handler-maps';
import type { OpenApiDocument } from '../http/openapi-document';
import { openApiValidator } from '../http/openapi-validator';
import { specRouter } from '../http/spec-router';
import type { GatewayMetrics } from '../metrics/metrics';
import type { Clock } from '../shared/clock';
import type { ChannelRouter } from '../channels/channel-router';
import { channelHealthHandlers } from '../channels/channels.handlers';
import { type ProcessLoad, shedUnderLoad } from '../http/load-shedding';
import type { CatalogService } from './catalog.service';
import { internalHandlers } from './internal.handlers';
import type { UsageService } from './usage.service';

export interface InternalAppDeps {
  db: Kysely<Database>;
  readiness: ReadinessService;
  logger: Logger;
  metrics: GatewayMetrics;
  serviceTokens: ServiceToken[];
  /** Cloudflare Access JWTs beside service tokens; undefined = not accepted. */
  accessJwt: AccessJwtVerifier | undefined;
  clock: Clock;
  bodyLimitBytes: number;
  bodyTimeoutMs: number;
  /** LOG_REQUESTS: one info line per request (default true). */
  logRequests?: boolean;
  /** Whether the process is overloaded, for the x-shed-under-load layer. */
  load: ProcessLoad;
  validateResponses: boolean;
  document: OpenApiDocument;
  generation: GenerationService;
  catalog: CatalogService;
  usage: UsageService;
  channels: ChannelRouter;
}

/**
 * The internal listener's 404: its reference page needs the service-token headers like every route
 * of this API, which a browser does not send by itself.
 */
export const INTERNAL_NOT_FOUND =
  'No such route. The API reference is GET /docs with the service-token headers (CF-Access-Client-Id, CF-Access-Client-Secret): ' +
  'in a browser through Cloudflare Access or an extension that adds request headers, or the raw document at /api/v1/creative/openapi.json ' +
  '(docs/clients/internal-api.md, "Opening /docs in a browser").';

/** The internal creative API (second listener): every route from openapi/creative.yaml, same error model. */
export function createInternalApp(deps: InternalAppDeps): Express {
  const health = healthHandlers(deps.readiness);
  // The internal listener trusts no proxy: its documents point at the Host it was called by.
  const servedDocument = documentForRequest(deps.document, undefined);
  const handlers: CreativeHandlers = {
    ...internalHandlers(deps),
    ...channelHealthHandlers(deps.channels),
    getInternalLiveness: health.liveness,
    getInternalReadiness: health.readiness,
    getMetrics: async () => ({ status: 200, contentType: deps.metrics.registry.contentType, body: await deps.metrics.registry.metrics() }),
    getCreativeOpenApiDocument: (request) => {
      const served = servedDocument({ header: (name) => request.header(name), peer: request.clientIp });
      return { status: 200, body: served.document as never, headers: served.headers };
    },
    // The page embeds the spec, so the browser needs no second authenticated request.
    getCreativeApiReference: docsPageHandler({ document: servedDocument, title: 'Creative Gateway internal API' }),
  };
  const imageInputs = imageInputsSupport(deps.document);
  const app = createBaseApp({ ...deps, bodyLimitFor: imageInputs.bodyLimitFor }, 'internal');
  const { router } = specRouter({
    document: deps.document,
    handlers,
    guards: {
      'ServiceTokenId+ServiceTokenSecret': serviceTokenGuard(deps.serviceTokens),
      CfAccessJwt: accessJwtGuard({ verifier: deps.accessJwt }),
    },
    layers: [
      { extension: 'x-shed-under-load', stage: 'before-validation', handler: shedUnderLoad(deps.load, () => deps.metrics.overloadRefusals.inc()) },
      { extension: 'x-image-inputs', ...imageInputs.layer },
    ],
    bodyParser: jsonBody(deps.bodyLimitBytes),
    validator: openApiValidator(deps.document, deps.validateResponses),
    notFoundMessage: INTERNAL_NOT_FOUND,
  });
  app.use(router);
  app.use(errorHandler(deps.logger));
  return app;
}
