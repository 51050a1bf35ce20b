import type { Express } from 'express';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { gatewayOperations } from '../generated/gateway.operations';
import { adminTokenHandlers } from './admin-tokens/admin-tokens.handlers';
import type { AdminTokensService } from './admin-tokens/admin-tokens.service';
import { auditHandlers } from './audit/audit.handlers';
import type { AuditService } from './audit/audit.service';
import { adminAccessJwtGuard } from './auth/access-admin-auth';
import type { AccessJwtVerifier } from './auth/access-jwt-auth';
import { adminGuard } from './auth/admin-auth';
import { consoleSessionGuard } from './auth/console-session-auth';
import { consoleSsoHandlers } from './console-sso/console-sso.handlers';
import type { ConsoleSso } from './console-sso/console-sso.service';
import { apiKeyGuard } from './auth/api-key-auth';
import type { Database } from './db/schema';
import { channelHandlers } from './channels/channels.handlers';
import { consoleHandlers } from './console/console.handlers';
import type { ChannelsService } from './channels/channels.service';
import { errorHandler } from './errors/error-handler';
import { adminGenerationHandlers } from './generation/admin-generations';
import { generationHandlers } from './generation/generation.handlers';
import type { GenerationFeature } from './generation/create-generation';
import { healthHandlers } from './health/health.handlers';
import type { ReadinessService } from './health/readiness';
import { imageHandlers } from './images/images.handlers';
import { imageInputsSupport } from './images/inputs/multipart-body';
import type { ImagesService } from './images/images.service';
import { createBaseApp, jsonBody } from './http/base-app';
import { docsPageHandler, documentForRequest } from './http/docs';
import type { GatewayHandlers } from './http/handler-maps';
import type { OpenApiDocument } from './http/openapi-document';
import { openApiValidator } from './http/openapi-validator';
import { specRouter } from './http/spec-router';
import type { GatewayMetrics } from './metrics/metrics';
import { idempotency } from './idempotency/idempotency.middleware';
import type { CatalogModel } from './config/catalog';
import { keyHandlers } from './keys/keys.handlers';
import { type ModelStatusOf, modelHandlers } from './keys/models.handlers';
import type { CidrSet } from './shared/cidr';
import { usageHandlers } from './usage/usage.handlers';
import type { UsageReportService } from './usage/usage.service';
import { webhookHandlers } from './webhooks/webhooks.handlers';
import type { WebhooksService } from './webhooks/webhooks.service';
import type { KeysService } from './keys/keys.service';
import { projectHandlers } from './projects/projects.handlers';
import type { ProjectsService } from './projects/projects.service';
import type { KeyLookup } from './keys/key-cache';
import { type ProcessLoad, shedUnderLoad } from './http/load-shedding';
import { rateLimitHeaders } from './ratelimit/rate-limit-headers.middleware';
import type { RateLimiter } from './ratelimit/rate-limiter';
import type { Clock } from './shared/clock';

export interface GatewayAppDeps {
  db: Kysely<Database>;
  readiness: ReadinessService;
  clock: Clock;
  logger: Logger;
  adminSecret: string;
  /** IDEMPOTENCY_LEASE_MS: how long an Idempotency-Key's claim holds without renewal. */
  idempotencyLeaseMs?: number;
  bodyLimitBytes: number;
  bodyTimeoutMs: number;
  /** LOG_REQUESTS: one info line per request (default true). */
  logRequests?: boolean;
  /** Whether the process is overloaded, for the x-shed-under-load layer. */
  load: ProcessLoad;
  validateResponses: boolean;
  document: OpenApiDocument;
  keys: KeysService;
  projects: ProjectsService;
  generation: GenerationFeature;
  rateLimiter: RateLimiter;
  metrics: GatewayMetrics;
  adminTokens: AdminTokensService;
  audit: AuditService;
  images: ImagesService;
  channels: ChannelsService;
  /** For `GET /v1/models`. */
  catalog: ReadonlyMap<string, CatalogModel>;
  /** Whether a catalog model has a channel that can serve it now, for `GET /v1/models`. */
  modelStatus: ModelStatusOf;
  /** TRUSTED_PROXIES: peers whose X-Forwarded-For is believed. */
  trustedProxies?: CidrSet;
  /** How the client-key guard finds keys (cached on PostgreSQL + Redis). */
  keyLookup?: KeyLookup;
  webhooks: WebhooksService;
  usage: UsageReportService;
  /** Cloudflare Access JWTs as admin credentials (CF_ACCESS_ADMIN_SCOPES); undefined = Access is not configured. */
  accessJwt?: AccessJwtVerifier;
  /** Console single sign-on (CONSOLE_OIDC_ISSUERS); undefined = not configured. */
  consoleSso?: ConsoleSso;
  /** PUBLIC_BASE_URL: the origin of the single sign-on redirect URIs (else the request's). */
  publicBaseUrl?: string;
}

/**
 * The public gateway: every route comes from openapi/gateway.yaml through the spec router, each
 * operation served by the handler of the same operationId and guarded by its `security`.
 */
export function createGatewayApp(deps: GatewayAppDeps): Express {
  const health = healthHandlers(deps.readiness);
  const servedDocument = documentForRequest(deps.document, deps.trustedProxies);
  const handlers: GatewayHandlers = {
    ...generationHandlers(deps.generation),
    ...adminGenerationHandlers(deps.generation.admin),
    ...keyHandlers(deps.keys),
    ...projectHandlers(deps.projects),
    ...adminTokenHandlers(deps.adminTokens),
    ...auditHandlers(deps.audit),
    ...imageHandlers(deps.images, deps.clock),
    ...channelHandlers(deps.channels),
    ...modelHandlers(deps.catalog, deps.modelStatus),
    ...webhookHandlers(deps.webhooks),
    ...usageHandlers(deps.usage),
    getLiveness: health.liveness,
    getReadiness: health.readiness,
    getOpenApiDocument: (request) => {
      const served = servedDocument({ header: (name) => request.header(name), peer: request.clientIp });
      return { status: 200, body: served.document as never, headers: served.headers };
    },
    getApiReference: docsPageHandler({ specUrl: gatewayOperations.getOpenApiDocument.path, title: 'Creative Gateway API' }),
    ...consoleHandlers(undefined, deps.accessJwt),
    ...consoleSsoHandlers(deps.consoleSso, deps.publicBaseUrl),
  };
  const imageInputs = imageInputsSupport(deps.document);
  const app = createBaseApp({ ...deps, bodyLimitFor: imageInputs.bodyLimitFor }, 'public');
  const { router } = specRouter({
    document: deps.document,
    handlers,
    guards: {
      ApiKey: apiKeyGuard(deps),
      AdminSecret: adminGuard(deps),
      AdminAccessJwt: adminAccessJwtGuard({ verifier: deps.accessJwt }),
      ConsoleSession: consoleSessionGuard({ sso: deps.consoleSso }),
    },
    // In this order for an operation that declares several: the rate-limit headers before the body is
    // read, so a body refused while it arrives still answers with them.
    layers: [
      { extension: 'x-shed-under-load', stage: 'before-validation', handler: shedUnderLoad(deps.load, () => deps.metrics.overloadRefusals.inc()) },
      { extension: 'x-rate-limited', stage: 'before-validation', handler: rateLimitHeaders(deps.rateLimiter, deps.clock) },
      { extension: 'x-image-inputs', ...imageInputs.layer },
      { extension: 'x-idempotent', stage: 'after-validation', handler: idempotency(deps) },
    ],
    bodyParser: jsonBody(deps.bodyLimitBytes),
    validator: openApiValidator(deps.document, deps.validateResponses),
  });
  app.use(router);
  app.use(errorHandler(deps.logger));
  return app;
}
