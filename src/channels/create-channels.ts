import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { CatalogModel } from '../config/catalog';
import type { GatewayConfig } from '../config/config';
import type { Database } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import type { ProviderRegistry } from '../providers/registry';
import type { Clock } from '../shared/clock';
import { MemoryLeaseStore } from '../leases/memory-lease-store';
import { ChannelLimits, type ChannelLimitStore } from './channel-limits';
import { registerChannelMetrics } from './channel-metrics';
import { ChannelRouter } from './channel-router';
import type { CredentialSealer } from './channel-sealing';
import { environmentChannels } from './channel.model';
import { ChannelsService } from './channels.service';

export interface ChannelsFeatureDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  logger: Logger;
  sealer: CredentialSealer;
  providers: ProviderRegistry;
  catalog: ReadonlyMap<string, CatalogModel>;
  /** Limits of API channels, shared by every replica. */
  sharedLimits: ChannelLimitStore;
  metrics: Registry;
}

/**
 * The channels feature: the router every generation goes through (its health probe started, its wait
 * line in the metrics) and the /admin/channels service that tells it about changes.
 */
export function createChannels(
  config: GatewayConfig,
  deps: ChannelsFeatureDeps,
): { router: ChannelRouter; admin: ChannelsService; close: () => Promise<void> } {
  const { db, clock, sealer, catalog } = deps;
  const { channels: settings } = config;
  const fromEnvironment = environmentChannels(config, clock.now());
  const router = new ChannelRouter({
    db,
    writes: deps.writes,
    clock,
    logger: deps.logger,
    sealer,
    environment: { channels: fromEnvironment, providers: deps.providers },
    resilience: config.providers.resilience,
    defaultResilience: config.providers.defaultResilience,
    sharedLimits: deps.sharedLimits,
    localLimits: new ChannelLimits(new MemoryLeaseStore()),
    queueTimeoutMs: settings.queueTimeoutMs,
    queueMaxWaiters: settings.queueMaxWaiters,
    pollIntervalMs: settings.pollIntervalMs,
    allowPrivateUpstreams: settings.allowPrivateUpstreams,
  });
  router.startProbe(settings.probeIntervalMs, catalog);
  registerChannelMetrics(deps.metrics, router);
  const admin = new ChannelsService({
    db,
    clock,
    sealer,
    router,
    catalog,
    environmentChannels: fromEnvironment,
    allowPrivateUpstreams: settings.allowPrivateUpstreams,
  });
  return { router, admin, close: () => router.close() };
}
