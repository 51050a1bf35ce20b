import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DestinationStream, Logger } from 'pino';
import { createGatewayApp } from './app';
import type { GatewayConfig } from './config/config';
import { openDatabase, type GatewayDatabase } from './db/database';
import { migrateToLatest } from './db/migrations';
import { GenerationService } from './generation/generation.service';
import { loadOpenApiDocument } from './http/openapi-document';
import { KeysService } from './keys/keys.service';
import { createLogger } from './logger';
import { startSweeper } from './maintenance/sweeper';
import { createProviderRegistry } from './providers/create-registry';
import { createRateLimiter } from './ratelimit/create-rate-limiter';
import { type Clock, systemClock } from './shared/clock';

export interface RunningGateway {
  url: string;
  port: number;
  database: GatewayDatabase;
  logger: Logger;
  close(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  logDestination?: DestinationStream;
}

/** Wires config into a running gateway: database (migrated), services, HTTP listener. */
export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const clock = options.clock ?? systemClock;
  const logger = createLogger(config.logLevel, options.logDestination);
  const database = openDatabase(config.databaseUrl, {
    poolSize: config.dbPoolSize,
    onIdleError: (error) => logger.warn({ err: error }, 'idle database connection lost'),
  });
  await migrateToLatest(database.db as never);

  const providers = createProviderRegistry(config, clock);
  const longestDeadlineMs = Math.max(...Object.values(config.providers.resilience).map((r) => r.timeoutMs));
  // Pending longer than its provider's deadline (+ grace) means the process handling it died.
  const staleAfterMs = Object.fromEntries(
    Object.entries(config.providers.resilience).map(([name, settings]) => [name, settings.timeoutMs + config.sweepGraceMs]),
  );
  const stopSweeper = await startSweeper({
    db: database.db,
    clock,
    staleAfterMs,
    intervalMs: 60_000,
    logger,
  });
  const rateLimiter = createRateLimiter(config, database);
  const catalog = new Map(config.catalog.map((entry) => [entry.model, entry]));
  const app = createGatewayApp({
    db: database.db,
    clock,
    logger,
    adminSecret: config.adminSecret,
    bodyLimitBytes: config.bodyLimitBytes,
    validateResponses: config.validateResponses,
    document: loadOpenApiDocument('gateway'),
    keys: new KeysService(database.db, clock, providers.names()),
    generation: new GenerationService({
      db: database.db,
      clock,
      catalog,
      providers,
      rateLimiter,
      logger,
    }),
    rateLimiter,
  });

  const server = http.createServer(app);
  let shuttingDown = false;
  // While draining, answers close their connection so clients move to another replica.
  server.on('request', (_req, res: http.ServerResponse) => {
    if (shuttingDown) res.setHeader('Connection', 'close');
  });
  server.headersTimeout = 15_000;
  server.requestTimeout = longestDeadlineMs + 30_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port, database: database.engine, rate_limit_store: config.rateLimitStore }, 'gateway listening');

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    database,
    logger,
    close() {
      closing ??= (async () => {
        // Graceful: stop accepting, let in-flight requests finish (up to the deadline), then
        // cut what is left, stop background work and close the stores.
        shuttingDown = true;
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const deadline = setTimeout(() => server.closeAllConnections(), config.shutdownTimeoutMs);
        await drained;
        clearTimeout(deadline);
        await stopSweeper();
        await rateLimiter.close();
        await database.close();
      })();
      return closing;
    },
  };
}
