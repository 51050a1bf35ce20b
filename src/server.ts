import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { DestinationStream, Logger } from 'pino';
import { AdminTokensService } from './admin-tokens/admin-tokens.service';
import { createGatewayApp } from './app';
import { AuditService } from './audit/audit.service';
import { UsageReportService } from './usage/usage.service';
import { createChannelLimitStore, MemoryLimitStore } from './channels/channel-limits';
import { registerChannelMetrics } from './channels/channel-metrics';
import { ChannelRouter } from './channels/channel-router';
import { CredentialSealer } from './channels/channel-sealing';
import { environmentChannels } from './channels/channel.model';
import { ChannelsService } from './channels/channels.service';
import { describeConfig, type GatewayConfig } from './config/config';
import { openDatabase, type GatewayDatabase } from './db/database';
// '/index', not the folder: a dist/ built before the split keeps db/migrations.js, which Node would load first.
import { migrateToLatest } from './db/migrations/index';
import { createGeneration } from './generation/create-generation';
import type { GenerationService } from './generation/generation.service';
import { modelHasRoom } from './generation/generation-worker';
import { loadOpenApiDocument } from './http/openapi-document';
import { createImagesService } from './images/create-images';
import type { ImagesService } from './images/images.service';
import { CatalogService } from './internal/catalog.service';
import { createInternalApp } from './internal/internal.app';
import { UsageService } from './internal/usage.service';
import { createConcurrencyLeases } from './keys/concurrency-leases';
import { KeysService } from './keys/keys.service';
import { createKeyLookup } from './keys/key-cache';
import { ConnectionGuard } from './http/connection-guard';
import { CidrSet } from './shared/cidr';
import { WebhookDispatcher } from './webhooks/dispatcher';
import { resealWebhookSecrets, WebhookSecrets } from './webhooks/secret-sealing';
import { WebhooksService } from './webhooks/webhooks.service';
import { createLogger } from './logger';
import { ReleaseRetries } from './maintenance/release-retries';
import { startIdleCompaction } from './maintenance/idle-compaction';
import { startSweeper } from './maintenance/sweeper';
import { GatewayMetrics } from './metrics/metrics';
import { createProviderRegistry } from './providers/create-registry';
import { createRateLimiter } from './ratelimit/create-rate-limiter';
import { closeRedis, connectionSettled, createRedisClient, pingRedis } from './ratelimit/redis-client';
import { DependencyHealth } from './health/dependency-health';
import { databaseProbe, type DependencyProbe, ReadinessService, waitForDependencies } from './health/readiness';
import { type Clock, systemClock } from './shared/clock';

export interface RunningGateway {
  /** Public gateway. */
  url: string;
  port: number;
  /** Internal creative API. */
  internalUrl: string;
  database: GatewayDatabase;
  logger: Logger;
  /** Stored images (for tests that sweep or inspect the store). */
  images: ImagesService;
  /** The Express apps, for tests that inspect routing. */
  apps: { public: Express; internal: Express };
  /** The generation service, for tests that call it as a request would. */
  generation: GenerationService;
  close(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  logDestination?: DestinationStream;
}

/** No request for this long (and none in flight): one full GC gives the heap grown under load back. */
const IDLE_COMPACTION_MS = 5000;

/** Pending connections the kernel may queue per listener (docs/operators/production.md: net.core.somaxconn). */
const LISTEN_BACKLOG = 4096;

interface Listener {
  server: http.Server;
  port: number;
  draining: { value: boolean };
}

/**
 * How often Node looks for connections past headersTimeout/requestTimeout. Its default (30 s) let
 * slow headers hold a connection 30 s, not the 15 s documented: check a tenth as often as the
 * timeout, at least once a second, so a connection is closed within 10% of it.
 */
export function connectionsCheckingIntervalMs(headersTimeoutMs: number): number {
  return Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 10)));
}

async function listen(
  app: http.RequestListener,
  port: number,
  host: string,
  timeouts: { headersMs: number; requestMs: number },
  guard: ConnectionGuard,
): Promise<Listener> {
  const server = http.createServer({ connectionsCheckingInterval: connectionsCheckingIntervalMs(timeouts.headersMs) }, app);
  guard.watch(server);
  server.headersTimeout = timeouts.headersMs;
  server.requestTimeout = timeouts.requestMs;
  server.keepAliveTimeout = 5_000;
  const draining = { value: false };
  // While draining, answers close their connection so clients move to another replica.
  server.on('request', (_req, res: http.ServerResponse) => {
    if (draining.value) res.setHeader('Connection', 'close');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Node's default backlog (511) overflows when thousands of clients connect at once, and the kernel then
    // drops handshakes (retried by clients after 1, 3, 7 s...). The kernel caps it at net.core.somaxconn.
    server.listen({ port, host, backlog: LISTEN_BACKLOG }, () => resolve());
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
  logger.info({ config: describeConfig(config) }, 'configuration');
  // Outage windows are wall-clock time, whatever clock the business logic runs on.
  const health = new DependencyHealth(systemClock, logger);
  const database = openDatabase(config.databaseUrl, {
    poolSize: config.dbPoolSize,
    connectTimeoutMs: config.dbConnectTimeoutMs,
    statementTimeoutMs: config.dbStatementTimeoutMs,
    health,
    onIdleError: (error) => logger.warn({ err: error }, 'idle database connection lost'),
  });
  // One fail-fast connection for every request-path store in Redis: rate limits, key and channel slots.
  const redis = config.redisUrl ? createRedisClient({ ...config, redisUrl: config.redisUrl }, health) : undefined;
  const rateLimiter = createRateLimiter(config, database, { redis, health, logger });
  const probes: DependencyProbe[] = [databaseProbe(database.db, database.engine)];
  // Startup and readiness wait for Redis when it holds the rate limits: every rate-limited request needs it
  // then. With another RATE_LIMIT_STORE, slots asked of Redis before it connects are refused (503) rather
  // than queued.
  if (redis && config.rateLimitStore === 'redis') probes.push({ dependency: 'redis', label: 'Redis', check: () => pingRedis(redis) });
  try {
    if (redis) await connectionSettled(redis, config.redisConnectTimeoutMs);
    await waitForDependencies(probes, { timeoutMs: config.dependencyStartupTimeoutMs, logger });
  } catch (error) {
    if (redis) await closeRedis(redis);
    await database.close().catch(() => undefined);
    // The process exits next: the retries logged so far must reach stdout first.
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
    throw error;
  }
  // With the SQL fallback a replica serves without Redis, so Redis is no part of its readiness.
  const readinessProbes = config.rateLimitRedisFallback === 'sql' ? probes.filter((probe) => probe.dependency !== 'redis') : probes;
  const readiness = new ReadinessService(readinessProbes, health, systemClock, config.readinessFailureWindowMs);
  await migrateToLatest(database.db as never, database.engine);

  const providers = createProviderRegistry(config);
  const metrics = new GatewayMetrics();
  const catalog = new Map(config.catalog.map((entry) => [entry.model, entry]));
  const images = await createImagesService(config, { db: database.db, writes: database.writes, clock, logger });
  const sealer = new CredentialSealer(config.channels.sealingKeys);
  const fromEnvironment = environmentChannels(config, clock.now());
  const channels = new ChannelRouter({
    db: database.db,
    writes: database.writes,
    clock,
    logger,
    sealer,
    environment: { channels: fromEnvironment, providers },
    resilience: config.providers.resilience,
    sharedLimits: createChannelLimitStore(redis, config.redisPrefix, health, database.db, database.engine),
    localLimits: new MemoryLimitStore(),
    queueTimeoutMs: config.channels.queueTimeoutMs,
    queueMaxWaiters: config.channels.queueMaxWaiters,
    pollIntervalMs: config.channels.pollIntervalMs,
    allowPrivateUpstreams: config.channels.allowPrivateUpstreams,
  });
  channels.startProbe(config.channels.probeIntervalMs, catalog);
  registerChannelMetrics(metrics.registry, channels);
  
  const leases = createConcurrencyLeases({
    db: database.db,
    engine: database.engine,
    redis,
    redisPrefix: config.redisPrefix,
    health,
    clock,
    ttlMs: config.keyLeaseTtlMs,
    logger,
  });

  const deadlines = Object.values(config.providers.resilience).map((r) => r.timeoutMs);
  // Pending longer than its provider's deadline (+ grace) means the process handling it died.
  const staleAfterMs = Object.fromEntries(
    Object.entries(config.providers.resilience).map(([name, settings]) => [name, settings.timeoutMs + config.sweepGraceMs]),
  );
  const releaseRetries = new ReleaseRetries(database.db, clock, logger, Math.min(...Object.values(staleAfterMs)));
  const webhookSecrets = new WebhookSecrets(sealer);
  const dispatcher = new WebhookDispatcher({ db: database.db, engine: database.engine, clock, logger, secrets: webhookSecrets, ...config.webhooks });
  const { service: generation, worker } = createGeneration({
    db: database.db,
    engine: database.engine,
    writes: database.writes,
    clock,
    logger,
    leaseMs: config.generations.leaseMs,
    maxQueuedPerKey: config.generations.maxQueuedPerKey,
    pollMs: config.generations.pollMs,
    worker: {
      pollMs: config.generations.pollMs,
      maxRunning: config.generations.workerConcurrency,
      modelsWithRoom: async (models) => {
        const roomy = await Promise.all(models.map(async (model) => ({ model, room: await modelHasRoom(channels, catalog, model) })));
        return roomy.filter((m) => m.room).map((m) => m.model);
      },
    },
    catalog,
    providers,
    rateLimiter,
    metrics,
    images,
    channels,
    leases,
    onUnsettled: (generationId, errorCode, mayAppear) => releaseRetries.retry(generationId, errorCode, mayAppear),
    ...(database.operationBudgetMs !== undefined ? { databaseBudgetMs: database.operationBudgetMs } : {}),
    webhooks: { secrets: webhookSecrets, allowPrivateNetworks: config.webhooks.allowPrivateNetworks, poke: () => dispatcher.poke() },
  });

  await resealWebhookSecrets(database.db, webhookSecrets, logger);
  dispatcher.start();
  const completionWebhooks = generation.completionWebhooks;
  const stopSweeper = await startSweeper({
    db: database.db,
    clock,
    staleAfterMs,
    intervalMs: 60_000,
    logger,
    images,
    generationRetentionMs: config.generationRetentionMs,
    ...(completionWebhooks ? { onSettled: (trx, id) => completionWebhooks.emit(trx, id) } : {}),
  });

  const common = {
    db: database.db,
    readiness,
    logger,
    metrics,
    bodyLimitBytes: config.bodyLimitBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    validateResponses: config.validateResponses,
    generation,
  };
  const keyLookup = createKeyLookup(config, database, logger);
  const publicApp = createGatewayApp({
    ...common,
    clock,
    adminSecret: config.adminSecret,
    document: loadOpenApiDocument('gateway'),
    keys: new KeysService(database.db, clock, providers.names(), catalog, (id) => keyLookup.changed(id)),
    keyLookup,
    rateLimiter,
    adminTokens: new AdminTokensService(database.db, clock),
    audit: new AuditService(database.db),
    images,
    channels: new ChannelsService({ db: database.db, clock, sealer, router: channels, catalog, environmentChannels: fromEnvironment, allowPrivateUpstreams: config.channels.allowPrivateUpstreams }),
    catalog,
    trustedProxies: config.trustedProxies.length > 0 ? CidrSet.of(config.trustedProxies) : undefined,
    webhooks: new WebhooksService(database.db, clock, config.webhooks.allowPrivateNetworks, webhookSecrets, () => dispatcher.poke()),
    usage: new UsageReportService(database.db),
  });
  const internalApp = createInternalApp({
    ...common,
    serviceTokens: config.serviceTokens,
    accessJwt: config.accessJwt,
    clock,
    document: loadOpenApiDocument('creative'),
    catalog: new CatalogService(catalog, providers, channels),
    usage: new UsageService(database.db),
    channels,
  });
  const requestTimeoutMs = Math.max(...deadlines) + 30_000;
  // One cap for both listeners: they share the process's file descriptors.
  const connections = new ConnectionGuard(config.maxConnections, logger);
  const timeouts = { headersMs: config.headersTimeoutMs, requestMs: requestTimeoutMs };
  const publicListener = await listen(publicApp, config.port, config.host, timeouts, connections);
  const internalListener = await listen(internalApp, config.internalPort, config.host, timeouts, connections);
  const stopIdleCompaction = startIdleCompaction({
    requestsStarted: () => connections.requestsStarted,
    busy: () => connections.busy(),
    idleMs: IDLE_COMPACTION_MS,
    minFreeBytes: config.idleCompactionMinFreeBytes,
    logger,
  });
  images.usePublicBaseUrl(`http://${config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host}:${publicListener.port}`);
  // Once the gateway knows its public address: a takeover's results carry its signed image URLs.
  await worker.start();
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
    images,
    apps: { public: publicApp, internal: internalApp },
    generation,
    close() {
      closing ??= (async () => {
        await Promise.all([drain(publicListener, config.shutdownTimeoutMs), drain(internalListener, config.shutdownTimeoutMs)]);
        stopIdleCompaction();
        await stopSweeper();
        await worker.stop();
        releaseRetries.close();
        await images.store.close();
        await channels.close();
        await dispatcher.stop();
        await rateLimiter.close();
        await keyLookup.close();
        await leases.close();
        if (redis) await closeRedis(redis);
        await database.close();
      })();
      return closing;
    },
  };
}
