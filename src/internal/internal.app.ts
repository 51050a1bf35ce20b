import type { Express } from 'express';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { serviceTokenAuth } from '../auth/service-token-auth';
import type { ServiceToken } from '../config/config';
import type { Database } from '../db/schema';
import { errorHandler, notFound } from '../errors/error-handler';
import type { GenerationService } from '../generation/generation.service';
import { healthRouter } from '../health/health.router';
import { createBaseApp, jsonBody } from '../http/base-app';
import { docsPageRouter } from '../http/docs';
import type { OpenApiDocument } from '../http/openapi-document';
import { openApiValidator } from '../http/openapi-validator';
import type { GatewayMetrics } from '../metrics/metrics';
import type { CatalogService } from './catalog.service';
import { createGenerationRouter } from './createGeneration.router';
import { getGenerationRouter } from './getGeneration.router';
import { getUsageRouter } from './getUsage.router';
import { listGenerationsRouter } from './listGenerations.router';
import { listModelsRouter } from './listModels.router';
import { listProvidersRouter } from './listProviders.router';
import type { UsageService } from './usage.service';

export interface InternalAppDeps {
  db: Kysely<Database>;
  logger: Logger;
  metrics: GatewayMetrics;
  serviceTokens: ServiceToken[];
  bodyLimitBytes: number;
  validateResponses: boolean;
  document: OpenApiDocument;
  generation: GenerationService;
  catalog: CatalogService;
  usage: UsageService;
}

/** The internal creative API (second listener): service-token guarded, same error model. */
export function createInternalApp(deps: InternalAppDeps): Express {
  const app = createBaseApp(deps, 'internal');
  app.use(['/api/v1/creative', '/docs'], serviceTokenAuth(deps.serviceTokens));
  app.use(jsonBody(deps.bodyLimitBytes));
  app.use(openApiValidator(deps.document, deps.validateResponses));

  app.use(healthRouter(deps.db));
  app.get('/metrics', async (_req, res) => {
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
  // The page embeds the spec, so the browser needs no second authenticated request.
  app.use(docsPageRouter({ document: deps.document, title: 'Creative Gateway internal API' }));
  app.get('/api/v1/creative/openapi.json', (_req, res) => {
    res.json(deps.document);
  });
  app.use(
    listModelsRouter(deps.catalog),
    listProvidersRouter(deps.catalog),
    createGenerationRouter(deps.generation),
    listGenerationsRouter(deps.usage),
    getGenerationRouter(deps.usage),
    getUsageRouter(deps.usage),
  );
  app.use(notFound);
  app.use(errorHandler(deps.logger));
  return app;
}
