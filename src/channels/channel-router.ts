import type { CatalogModel } from '../config/catalog';
import { ChannelDirectory, type Routable } from './channel-directory';
import { ChannelFailover, type TaskJournal } from './channel-failover';
import { type ChannelHealth, ChannelHealthMonitor, type ChannelTestOutcome, type ModelStatus, type ProviderHealthSummary } from './channel-health';
import { type ChannelRouterDeps, ChannelRuntimes } from './channel-runtime';
import { ChannelWaitLine, type ModelRoom } from './channel-wait-line';
import { type ChainRun, ModelFallbacks, type ModelStage } from './model-fallbacks';

export type { ChainRun, ChannelHealth, ChannelRouterDeps, ChannelTestOutcome, ModelRoom, ModelStage, ProviderHealthSummary, TaskJournal };

/**
 * Sends each generation to a channel (upstream account) of its model: enabled, under its limits,
 * not cooling down, breaker not open; the highest priority tier first, weighted random within it.
 * A failure that proves the upstream accepted nothing moves the call to another channel (never one
 * that already failed it) within the request's one deadline; anything the upstream may have
 * accepted is never sent again. See docs/operators/channels.md.
 *
 * The parts: the channel directory (channel-directory.ts), the per-replica breakers, cool-downs and
 * stats (channel-runtime.ts), the choice of a channel and the wait line (channel-wait-line.ts),
 * failover (channel-failover.ts), model fallbacks (model-fallbacks.ts), and health, test and probe
 * (channel-health.ts).
 */
export class ChannelRouter {
  private readonly directory: ChannelDirectory;
  private readonly waitLine: ChannelWaitLine;
  private readonly fallbacks: ModelFallbacks;
  private readonly monitor: ChannelHealthMonitor;

  constructor(private readonly deps: ChannelRouterDeps) {
    const runtimes = new ChannelRuntimes(deps);
    this.directory = new ChannelDirectory(deps);
    this.waitLine = new ChannelWaitLine(deps, this.directory, runtimes);
    this.fallbacks = new ModelFallbacks(new ChannelFailover(deps, this.directory, runtimes, this.waitLine), deps.logger);
    this.monitor = new ChannelHealthMonitor(deps, this.directory, runtimes);
  }

  /** Every channel (environment first), re-read from the database at most once a second. */
  channels(): Promise<Routable[]> {
    return this.directory.channels();
  }

  /** Forget the cached list: the next request reads the database (after a change on this replica). */
  invalidate(): void {
    this.directory.invalidate();
  }

  /**
   * See ModelFallbacks.generate: the generation's calls on its model (ChannelFailover.generate:
   * routed and failed over), then on its fallbacks while the provider fails, with their attempt rows.
   */
  generate(...args: Parameters<ModelFallbacks['generate']>): Promise<ChainRun> {
    return this.fallbacks.generate(...args);
  }

  /** See ChannelWaitLine.roomFor: a hint for the durable worker, no slot is taken. */
  roomFor(entry: CatalogModel): Promise<ModelRoom> {
    return this.waitLine.roomFor(entry);
  }

  /** Calls waiting for a slot on this replica, per model (the saturation queue's depth). */
  waitingByModel(): Array<[string, number]> {
    return this.waitLine.waitingByModel();
  }

  /** Whether any channel (whatever its status) serves models of `provider` over `transport`. */
  isConfigured(provider: string, transport?: string): Promise<boolean> {
    return this.monitor.isConfigured(provider, transport);
  }

  /** See ChannelHealthMonitor.modelStatus. */
  modelStatus(entry: CatalogModel): Promise<ModelStatus> {
    return this.monitor.modelStatus(entry);
  }

  /** A provider's health on this replica: its requests' outcomes and the best breaker among its channels. */
  providerHealth(provider: string): Promise<ProviderHealthSummary> {
    return this.monitor.providerHealth(provider);
  }

  /** Every channel's health, or only `channelId`'s. */
  health(channelId?: string): Promise<ChannelHealth[]> {
    return this.monitor.health(channelId);
  }

  /** See ChannelHealthMonitor.test: one real call on the channel, outside its limits and breaker. */
  test(channelId: string, entry: CatalogModel): Promise<ChannelTestOutcome> {
    return this.monitor.test(channelId, entry);
  }

  /** See ChannelHealthMonitor.startProbe: re-enables auto-disabled channels that pass a test. */
  startProbe(intervalMs: number, catalog: ReadonlyMap<string, CatalogModel>): void {
    this.monitor.startProbe(intervalMs, catalog);
  }

  probeOnce(intervalMs: number, catalog: ReadonlyMap<string, CatalogModel>): Promise<boolean> {
    return this.monitor.probeOnce(intervalMs, catalog);
  }

  async close(): Promise<void> {
    this.monitor.stopProbe();
    await this.deps.sharedLimits.close();
  }
}
