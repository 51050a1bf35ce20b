import { ConsoleSso } from './console-sso/console-sso.service';
import type { Express } from 'express';
import type Redis from 'ioredis';
import type { DestinationStream, Logger } from 'pino';
import { AdminTokensService } from './admin-tokens/admin-tokens.service';
import { createGatewayApp } from './app';
import { AccessJwtVerifier } from './auth/access-jwt-auth';
import { AuditService } from './audit/audit.service';
import { createChannelLimitStore } from './channels/channel-limits';
import { CredentialSealer } from './channels/channel-sealing';
import { createChannels } from './channels/create-channels';
import { describeConfig, type GatewayConfig } from './config/config';
import { openDatabase, type GatewayDatabase } from './db/database';
// '/index', not the folder: a dist/ built before the split keeps db/migrations.js, which Node would load first.
import { migrateToLatest } from './db/migrations/index';
import { createGeneration } from './generation/create-generation';
import type { GenerationService } from './generation/generation.service';
import { modelHasRoom } from './generation/generation-worker';
import { DependencyHealth } from './health/dependency-health';
import { databaseProbe, type DependencyProbe, imageStoreProbe, ReadinessService, waitForDependencies } from './health/readiness';
import { admissionBound, LoadMonitor } from './http/load-shedding';
import { startListeners } from './http/listeners';
import { loadOpenApiDocument } from './http/openapi-document';
import { createImagesService } from './images/create-images';
import type { ImagesService } from './images/images.service';
import { CatalogService } from './internal/catalog.service';
import { createInternalApp } from './internal/internal.app';
import { UsageService } from './internal/usage.service';
import { createConcurrencyLeases } from './keys/concurrency-leases';
import { createKeyLookup } from './keys/key-cache';
import { KeysService } from './keys/keys.service';
import { ProjectsService } from './projects/projects.service';
import { ProjectModeration } from './guardrails/project-moderation';
import { createLogger } from './logger';
import { startIdleCompaction } from './maintenance/idle-compaction';
import { ReleaseRetries } from './maintenance/release-retries';
import { startSweeper } from './maintenance/sweeper';
import { GatewayMetrics } from './metrics/metrics';
import type { AdmissionBound } from './db/write-transactions';
import { createProviderRegistry } from './providers/create-registry';
import { createRateLimiter } from './ratelimit/create-rate-limiter';
import { closeRedis, connectionSettled, createRedisClient, pingRedis } from './ratelimit/redis-client';
import { CidrSet } from './shared/cidr';
import { type Clock, systemClock } from './shared/clock';
import { CloserStack } from './shared/closer-stack';
import { CursorCodec } from './shared/cursor';
import { type ListeningUrls, listeningUrls, type ModelInService, summarizeConfig } from './startup-announcement';
import { startTracing } from './telemetry/start-tracing';
import { UsageReportService } from './usage/usage.service';
import { createWebhooks } from './webhooks/create-webhooks';

export interface RunningGateway {
  /** Public gateway. */
  url: string;
  port: number;
  /** Internal creative API. */
  internalUrl: string;
  /** Where it answers and what it serves, as the startup announces them. */
  listening: { urls: ListeningUrls; models: ModelInService[] };
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

/**
 * The database and Redis, open once both answer (each pushed on `closers` as it opens), and the
 * schema migrated; with the readiness checks that watch them from then on.
 */
async function connectStores(
  config: GatewayConfig,
  logger: Logger,
  closers: CloserStack,
  onDatabaseWait: (ms: number) => void,
  admission: AdmissionBound,
): Promise<{ database: GatewayDatabase; redis: Redis | undefined; health: DependencyHealth; readinessProbes: DependencyProbe[] }> {
  // Outage windows are wall-clock time, whatever clock the business logic runs on.
  const health = new DependencyHealth(systemClock, logger);
  const database = closers.add(
    'database',
    openDatabase(config.databaseUrl, {
      poolSize: config.dbPoolSize,
      connectTimeoutMs: config.dbConnectTimeoutMs,
      statementTimeoutMs: config.dbStatementTimeoutMs,
      health,
      onWait: onDatabaseWait,
      admission,
      onIdleError: (error) => logger.warn({ err: error }, 'idle database connection lost'),
    }),
  );
  // One fail-fast connection for every request-path store in Redis: rate limits, key and channel slots.
  const redis = config.redisUrl ? createRedisClient({ ...config, redisUrl: config.redisUrl }, health) : undefined;
  if (redis) closers.push('redis', () => closeRedis(redis));
  const probes: DependencyProbe[] = [databaseProbe(database.db)];
  // Startup and readiness wait for Redis when it holds the rate limits: every rate-limited request needs it
  // then. With another RATE_LIMIT_STORE, slots asked of Redis before it connects are refused (503) rather
  // than queued.
  if (redis && config.rateLimitStore === 'redis') probes.push({ dependency: 'redis', label: 'Redis', check: () => pingRedis(redis) });
  if (redis) await connectionSettled(redis, config.redisConnectTimeoutMs);
  await waitForDependencies(probes, { timeoutMs: config.dependencyStartupTimeoutMs, logger });
  // With the SQL fallback a replica serves without Redis, so Redis is no part of its readiness.
  const readinessProbes = config.rateLimitRedisFallback === 'sql' ? probes.filter((probe) => probe.dependency !== 'redis') : probes;
  await migrateToLatest(database.db as never, database.engine);
  return { database, redis, health, readinessProbes };
}

/**
 * A store that does not answer at startup (S3: a wrong endpoint, bucket or credentials) is reported
 * in one line rather than at the first generation; the gateway still starts (the store may come
 * up later) and /readyz answers 503 until it answers.
 */
async function reportUnreachableImageStore(probe: DependencyProbe | undefined, description: string, logger: Logger): Promise<void> {
  if (!probe) return;
  try {
    await probe.check();
  } catch (error) {
    const reason = (error as Error)?.message || String(error);
    logger.warn(
      { dependency: probe.dependency, image_store: description, reason },
      `${probe.label} does not answer (${reason}): generations that return URLs and image inputs fail, and /readyz answers 503, until it does`,
    );
  }
}

/**
 * Wires config into a running gateway, one feature after another, each pushing what closes it on
 * one stack: stores, key-path state, images, channels, webhooks, generation, maintenance, the apps
 * and their listeners. Shutdown (or a failed start) closes them in reverse: the listeners drain
 * first, the database closes last.
 */
export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const clock = options.clock ?? systemClock;
  const logger = createLogger(config.logLevel, options.logDestination);
  // A short line at info (the first thing a failed start shows), the full one for debugging.
  logger.info({ config: summarizeConfig(config) }, 'configuration');
  logger.debug({ config: describeConfig(config) }, 'effective configuration');
  const closers = new CloserStack(logger);
  try {
    return await startFeatures(config, clock, logger, closers);
  } catch (error) {
    // Each close that fails is logged by the stack; the startup error is the one that counts.
    await closers.closeAll().catch(() => undefined);
    // The process exits next: the retries logged so far must reach stdout first.
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
    throw error;
  }
}

async function startFeatures(config: GatewayConfig, clock: Clock, logger: Logger, closers: CloserStack): Promise<RunningGateway> {
  // First on the stack, so closed last: the spans of the drain are exported too.
  const tracing = await startTracing(config.telemetry, config.trustedProxies.length > 0 ? CidrSet.of(config.trustedProxies) : undefined);
  if (tracing) closers.push('traces', () => tracing.close());
  // Before the database opens: it reports its waits to the monitor.
  const load = closers.add('load monitor', new LoadMonitor({ eventLoopDelayMs: config.shedEventLoopDelayMs, databaseWaitMs: config.shedDatabaseWaitMs }));
  const metrics = new GatewayMetrics();
  const admission = admissionBound(config.admissionDatabaseWaitMs, () => metrics.overloadRefusals.inc());
  const { database, redis, health, readinessProbes } = await connectStores(config, logger, closers, load.databaseWaited, admission);
  const { db, engine, writes } = database;

  const rateLimiter = closers.add('rate limiter', createRateLimiter(config, database, { redis, health, logger }));
  const keyLookup = closers.add('key lookup', createKeyLookup(config, database, logger));
  const leases = closers.add(
    'key concurrency leases',
    createConcurrencyLeases({
      db: database.db,
      redis,
      redisPrefix: config.redisPrefix,
      health,
      clock,
      ttlMs: config.keyLeaseTtlMs,
      logger,
    }),
  );

  const providers = createProviderRegistry(config);
  const catalog = new Map(config.catalog.map((entry) => [entry.model, entry]));
  const images = await createImagesService(config, { db, writes, clock, logger });
  closers.push('image store', () => images.store.close());
  const imageStore = imageStoreProbe(images.store, systemClock);
  await reportUnreachableImageStore(imageStore, images.store.description, logger);
  const readiness = new ReadinessService(imageStore ? [...readinessProbes, imageStore] : readinessProbes, health, systemClock, config.readinessFailureWindowMs);
  const sealer = new CredentialSealer(config.channels.sealingKeys);
  const cursors = new CursorCodec(config.channels.sealingKeys);
  const channels = closers.add(
    'channels',
    createChannels(config, {
      db,
      writes,
      clock,
      logger,
      sealer,
      providers,
      catalog,
      sharedLimits: createChannelLimitStore(redis, config.redisPrefix, health, database.db),
      metrics: metrics.registry,
    }),
  );
  const webhooks = closers.add('webhooks', await createWebhooks(config, { db, clock, logger, sealer, cursors }));

  // Pending longer than its provider's deadline (+ grace) means the process handling it died.
  const staleAfterMs = Object.fromEntries(
    Object.entries(config.providers.resilience).map(([name, settings]) => [name, settings.timeoutMs + config.sweepGraceMs]),
  );
  const releaseRetries = closers.add('release retries', new ReleaseRetries(db, clock, logger, Math.min(...Object.values(staleAfterMs))));
  const generation = closers.add(
    'generation worker',
    createGeneration({
      db,
      writes,
      clock,
      logger,
      leaseMs: config.generations.leaseMs,
      maxQueuedPerKey: config.generations.maxQueuedPerKey,
      pollMs: config.generations.pollMs,
      promptRetention: config.promptRetention,
      worker: {
        pollMs: config.generations.pollMs,
        maxRunning: config.generations.workerConcurrency,
        modelsWithRoom: async (models) => {
          const roomy = await Promise.all(models.map(async (model) => ({ model, room: await modelHasRoom(channels.router, catalog, model) })));
          return roomy.filter((m) => m.room).map((m) => m.model);
        },
      },
      catalog,
      providers,
      rateLimiter,
      cursors,
      metrics,
      images,
      channels: channels.router,
      leases,
      onUnsettled: (generationId, errorCode, mayAppear, unbilled) => releaseRetries.retry(generationId, errorCode, mayAppear, unbilled),
      ...(database.operationBudgetMs !== undefined ? { databaseBudgetMs: database.operationBudgetMs } : {}),
      webhooks: { secrets: webhooks.secrets, allowPrivateNetworks: config.webhooks.allowPrivateNetworks, poke: () => webhooks.dispatcher.poke() },
      // Projects' moderation hooks go through the webhooks' address guard, with their setting.
      moderation: new ProjectModeration({ secrets: webhooks.secrets, clock, network: { allowPrivateNetworks: config.webhooks.allowPrivateNetworks }, logger }),
    }),
  );
  const { worker, completionWebhooks } = generation;
  closers.push(
    'sweeper',
    await startSweeper({
      db,
      clock,
      staleAfterMs,
      intervalMs: 60_000,
      logger,
      images,
      generationRetentionMs: config.generationRetentionMs,
      promptRetention: config.promptRetention,
      ...(completionWebhooks ? { onSettled: (trx, id) => completionWebhooks.emit(trx, id) } : {}),
    }),
  );

  const common = {
    db,
    load,
    readiness,
    logger,
    metrics,
    bodyLimitBytes: config.bodyLimitBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    logRequests: config.logRequests,
    validateResponses: config.validateResponses,
  };
  // One verifier for both listeners: the team's signing keys are cached once.
  const accessJwt = config.accessJwt ? new AccessJwtVerifier(config.accessJwt, clock, logger) : undefined;
  const keys = new KeysService(db, clock, providers.names(), cursors, catalog, (id) => keyLookup.changed(id));
  const hooks = { secrets: webhooks.secrets, allowPrivateNetworks: config.webhooks.allowPrivateNetworks };
  const projects = new ProjectsService(db, clock, providers.names(), cursors, catalog, keys, hooks, async (keyIds) => {
    for (const id of keyIds) await keyLookup.changed(id);
  });
  // Discovery of every single sign-on issuer before listening: one that fails stops startup.
  const consoleSso = config.consoleSso ? await ConsoleSso.start(config.consoleSso, { db, clock, logger }) : undefined;
  const publicApp = createGatewayApp({
    accessJwt,
    consoleSso,
    publicBaseUrl: config.images.publicBaseUrl,
    ...common,
    clock,
    generation,
    adminSecret: config.adminSecret,
    idempotencyLeaseMs: config.idempotencyLeaseMs,
    document: loadOpenApiDocument('gateway'),
    keys,
    projects,
    keyLookup,
    rateLimiter,
    adminTokens: new AdminTokensService(db, clock, cursors),
    audit: new AuditService(db, cursors),
    images,
    channels: channels.admin,
    catalog,
    modelStatus: (entry) => channels.router.modelStatus(entry),
    trustedProxies: config.trustedProxies.length > 0 ? CidrSet.of(config.trustedProxies) : undefined,
    webhooks: webhooks.admin,
    usage: new UsageReportService(db, cursors, catalog, clock, config.creditsPerUsd),
  });
  const catalogService = new CatalogService(catalog, providers, channels.router);
  const internalApp = createInternalApp({
    ...common,
    generation: generation.service,
    serviceTokens: config.serviceTokens,
    accessJwt,
    clock,
    document: loadOpenApiDocument('creative'),
    catalog: catalogService,
    usage: new UsageService(db, cursors),
    channels: channels.router,
  });
  const deadlines = Object.values(config.providers.resilience).map((r) => r.timeoutMs);
  const listeners = closers.add(
    'listeners',
    await startListeners(
      { public: publicApp, internal: internalApp },
      {
        host: config.host,
        port: config.port,
        internalPort: config.internalPort,
        maxConnections: config.maxConnections,
        headersTimeoutMs: config.headersTimeoutMs,
        requestTimeoutMs: Math.max(...deadlines) + 30_000,
        shutdownTimeoutMs: config.shutdownTimeoutMs,
      },
      logger,
    ),
  );
  closers.push(
    'idle compaction',
    startIdleCompaction({
      requestsStarted: () => listeners.connections.requestsStarted,
      busy: () => listeners.connections.busy(),
      idleMs: IDLE_COMPACTION_MS,
      minFreeBytes: config.idleCompactionMinFreeBytes,
      logger,
    }),
  );
  const urls = listeningUrls(config.host, listeners.publicPort, listeners.internalPort);
  images.usePublicBaseUrl(urls.api);
  // Once the gateway knows its public address: a takeover's results carry its signed image URLs.
  await worker.start();
  const models = (await catalogService.models()).map(({ model, status }) => ({ model, status }));
  logger.info(
    { port: listeners.publicPort, internal_port: listeners.internalPort, urls, models, database: engine, rate_limit_store: config.rateLimitStore },
    'gateway listening',
  );

  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${listeners.publicPort}`,
    port: listeners.publicPort,
    internalUrl: `http://127.0.0.1:${listeners.internalPort}`,
    listening: { urls, models },
    database,
    logger,
    images,
    apps: { public: publicApp, internal: internalApp },
    generation: generation.service,
    close: () => (stopping ??= closers.closeAll().then(() => logger.info('stopped'))),
  };
}
