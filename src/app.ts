import type { Express } from 'express';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { adminAuth } from './auth/admin-auth';
import { apiKeyAuth } from './auth/api-key-auth';
import type { Database } from './db/schema';
import { errorHandler, notFound } from './errors/error-handler';
import { createImageOpenAIRouter } from './generation/createImageOpenAI.router';
import { generateImageRouter } from './generation/generateImage.router';
import type { GenerationService } from './generation/generation.service';
import { createBaseApp, jsonBody } from './http/base-app';
import { docsPageRouter } from './http/docs';
import type { OpenApiDocument } from './http/openapi-document';
import { openApiValidator } from './http/openapi-validator';
import { healthRouter } from './health/health.router';
import type { GatewayMetrics } from './metrics/metrics';
import { idempotency } from './idempotency/idempotency.middleware';
import { adminKeysRouter } from './keys/routes';
import type { KeysService } from './keys/keys.service';
import { rateLimitHeaders } from './ratelimit/rate-limit-headers.middleware';
import type { RateLimiter } from './ratelimit/rate-limiter';
import type { Clock } from './shared/clock';

export interface GatewayAppDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  adminSecret: string;
  bodyLimitBytes: number;
  validateResponses: boolean;
  document: OpenApiDocument;
  keys: KeysService;
  generation: GenerationService;
  rateLimiter: RateLimiter;
  metrics: GatewayMetrics;
}

/**
 * The public gateway. Order matters: ids and logging, then auth (so key errors keep their own
 * codes), then the spec validator, then the thin operation routers (the generation routes first:
 * they carry the traffic, and Express tries routers in order), then the one error handler.
 */
export function createGatewayApp(deps: GatewayAppDeps): Express {
  const app = createBaseApp(deps, 'public');
  app.use('/admin', adminAuth(deps.adminSecret));
  app.use(['/images', '/v1/images'], apiKeyAuth(deps), rateLimitHeaders(deps.rateLimiter, deps.clock));

  app.use(jsonBody(deps.bodyLimitBytes));
  app.use(openApiValidator(deps.document, deps.validateResponses));

  app.use(idempotency(deps));
  app.use(generateImageRouter(deps.generation));
  app.use(createImageOpenAIRouter(deps.generation));
  app.use(healthRouter(deps.db));
  app.use(docsPageRouter({ specUrl: '/openapi.json', title: 'Creative Gateway API' }));
  app.get('/openapi.json', (_req, res) => {
    res.json(deps.document);
  });
  app.use(adminKeysRouter(deps.keys));

  app.use(notFound);
  app.use(errorHandler(deps.logger));
  return app;
}
