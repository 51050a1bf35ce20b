import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { DestinationStream, Logger } from 'pino';
import { createGatewayApp } from './app';
import type { GatewayConfig } from './config/config';
import { openDatabase, type GatewayDatabase } from './db/database';
import { migrateToLatest } from './db/migrations';
import { GenerationService } from './generation/generation.service';
import { loadOpenApiDocument } from './http/openapi-document';
import { CatalogService } from './internal/catalog.service';
import { createInternalApp } from './internal/internal.app';
import { UsageService } from './internal/usage.service';
import { createConcurrencyLeases } from './keys/concurrency-leases';
import { KeysService } from './keys/keys.service';
import { CidrSet } from './shared/cidr';
import { WebhookDispatcher } from './webhooks/dispatcher';
import { WebhooksService } from './webhooks/webhooks.service';
import { createLogger } from './logger';
import { startSweeper } from './maintenance/sweeper';
import { GatewayMetrics } from './metrics/metrics';
import { createProviderRegistry } from './providers/create-registry';
import { createRateLimiter } from './ratelimit/create-rate-limiter';
import { type Clock, systemClock } from './shared/clock';

export interface RunningGateway {
  /** Public gateway. */
  url: string;
  port: number;
  /** Internal creative API. */
  internalUrl: string;
  database: GatewayDatabase;
  logger: Logger;
  /** The Express apps, for tests that inspect routing. */
  apps: { public: Express; internal: Express };
  close(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  logDestination?: DestinationStream;
}

interface Listener {
  server: http.Server;
  port: number;
  draining: { value: boolean };
}

async function listen(app: http.RequestListener, port: number, host: string, requestTimeoutMs: number): Promise<Listener> {
  const server = http.createServer(app);
  server.headersTimeout = 15_000;
  server.requestTimeout = requestTimeoutMs;
  server.keepAliveTimeout = 5_000;
  const draining = { value: false };
  // While draining, answers close their connection so clients move to another replica.
  server.on('request', (_req, res: http.ServerResponse) => {
    if (draining.value) res.setHeader('Connection', 'close');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port, draining };
}

/** Graceful: stop accepting, let in-flight requests finish up to the deadline, then cut the rest. */
async function drain(listener: Listener, deadlineMs: number): Promise<void> {
  listener.draining.value = true;
  const closed = new Promise<void>((resolve) => listener.server.close(() => resolve()));
  listener.server.closeIdleConnections();
  const deadline = setTimeout(() => listener.server.closeAllConnections(), deadlineMs);
  await closed;
  clearTimeout(deadline);
}

/** Wires config into a running gateway: database (migrated), services, both HTTP listeners. */
export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const clock = options.clock ?? systemClock;
  const logger = createLogger(config.logLevel, options.logDestination);
  const database = openDatabase(config.databaseUrl, {
    poolSize: config.dbPoolSize,
    onIdleError: (error) => logger.warn({ err: error }, 'idle database connection lost'),
  });
  await migrateToLatest(database.db as never, database.engine);

  const providers = createProviderRegistry(config, clock);
  const metrics = new GatewayMetrics();
  const rateLimiter = createRateLimiter(config, database);
  const catalog = new Map(config.catalog.map((entry) => [entry.model, entry]));
  const leases = createConcurrencyLeases({
    db: database.db,
    engine: database.engine,
    redisUrl: config.redisUrl,
    redisPrefix: config.redisPrefix,
    clock,
    ttlMs: config.keyLeaseTtlMs,
    logger,
  });
  const generation = new GenerationService({ writes: database.writes, clock, catalog, providers, rateLimiter, metrics, logger, leases });

  const deadlines = Object.values(config.providers.resilience).map((r) => r.timeoutMs);
  // Pending longer than its provider's deadline (+ grace) means the process handling it died.
  const staleAfterMs = Object.fromEntries(
    Object.entries(config.providers.resilience).map(([name, settings]) => [name, settings.timeoutMs + config.sweepGraceMs]),
  );
  const stopSweeper = await startSweeper({ db: database.db, clock, staleAfterMs, intervalMs: 60_000, logger });

  const dispatcher = new WebhookDispatcher({ db: database.db, engine: database.engine, clock, logger, ...config.webhooks });
  dispatcher.start();

  const common = { db: database.db, logger, metrics, bodyLimitBytes: config.bodyLimitBytes, validateResponses: config.validateResponses, generation };
  const publicApp = createGatewayApp({
    ...common,
    clock,
    adminSecret: config.adminSecret,
    document: loadOpenApiDocument('gateway'),
    keys: new KeysService(database.db, clock, providers.names(), catalog),
    rateLimiter,
    catalog,
    trustedProxies: config.trustedProxies.length > 0 ? CidrSet.of(config.trustedProxies) : undefined,
    webhooks: new WebhooksService(database.db, clock, config.webhooks.allowPrivateNetworks, () => dispatcher.poke()),
  });
  const internalApp = createInternalApp({
    ...common,
    serviceTokens: config.serviceTokens,
    document: loadOpenApiDocument('creative'),
    catalog: new CatalogService(catalog, providers),
    usage: new UsageService(database.db),
  });
  const requestTimeoutMs = Math.max(...deadlines) + 30_000;
  const publicListener = await listen(publicApp, config.port, config.host, requestTimeoutMs);
  const internalListener = await listen(internalApp, config.internalPort, config.host, requestTimeoutMs);
  logger.info(
    { port: publicListener.port, internal_port: internalListener.port, database: database.engine, rate_limit_store: config.rateLimitStore },
    'gateway listening',
  );

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${publicListener.port}`,
    port: publicListener.port,
    internalUrl: `http://127.0.0.1:${internalListener.port}`,
    database,
    logger,
    apps: { public: publicApp, internal: internalApp },
    close() {
      closing ??= (async () => {
        await Promise.all([drain(publicListener, config.shutdownTimeoutMs), drain(internalListener, config.shutdownTimeoutMs)]);
        await stopSweeper();
        await dispatcher.stop();
        await rateLimiter.close();
        await leases.close();
        await database.close();
      })();
      return closing;
    },
  };
}
