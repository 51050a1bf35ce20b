import type { components } from '../../generated/gateway';
import { randomBytes } from 'node:crypto';
import type { CatalogModel } from '../config/catalog';
import { ApiError } from '../errors/api-error';
import { UpstreamError } from '../providers/upstream-errors';
import type { ChannelDirectory } from './channel-directory';
import type { ChannelUsage } from './channel-limits';
import { type ChannelRouterDeps, type ChannelRuntimes, LEASE_GRACE_MS } from './channel-runtime';
import { type Channel, servesModel } from './channel.model';
import type { BreakerState } from './resilience/circuit-breaker';
import type { ProviderStats } from './resilience/provider-stats';

/** The shared lease that lets one replica at a time run the periodic probe. */
const PROBE_LEASE = 'channel-probe';

export interface ChannelHealth {
  channel: Channel;
  circuit: BreakerState;
  usage: ChannelUsage;
  coolingUntil: number | null;
  stats: ReturnType<ProviderStats['snapshot']>;
}

export interface ProviderHealthSummary {
  circuit: BreakerState;
  in_flight: number;
  calls: number;
  error_rate: number;
  latency_ms: { p50: number | null; p95: number | null; p99: number | null };
}

/** Whether a catalog model can serve now. */
export type ModelStatus = components['schemas']['ModelStatus'];

export interface ChannelTestOutcome {
  ok: boolean;
  latencyMs: number;
  error?: ApiError;
}

type HealthDeps = Pick<ChannelRouterDeps, 'clock' | 'logger' | 'sharedLimits'>;

/** Health reports of channels and providers, the one-call channel test, and the periodic probe of auto-disabled channels. */
export class ChannelHealthMonitor {
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(
    private readonly deps: HealthDeps,
    private readonly directory: ChannelDirectory,
    private readonly runtimes: ChannelRuntimes,
  ) {}

  /** Whether any channel (whatever its status) serves models of `provider` over `transport`. */
  async isConfigured(provider: string, transport?: string): Promise<boolean> {
    return (await this.directory.channels()).some(
      (r) => r.channel.provider === provider && (transport === undefined || r.channel.transport === transport || r.channel.transport === 'local'),
    );
  }

  /**
   * Whether `entry` can serve on this replica: unconfigured without a channel serving it, available
   * while one of them is enabled with its circuit not open, degraded otherwise.
   */
  async modelStatus(entry: CatalogModel): Promise<ModelStatus> {
    const serving = (await this.directory.channels()).filter((r) => servesModel(r.channel, entry));
    if (serving.length === 0) return 'unconfigured';
    return serving.some((r) => r.channel.status === 'enabled' && this.runtimes.runtime(r.channel).breaker.state !== 'open') ? 'available' : 'degraded';
  }

  /** A provider's health on this replica: its requests' outcomes and the best breaker among its channels. */
  async providerHealth(provider: string): Promise<ProviderHealthSummary> {
    const channels = (await this.directory.channels()).filter((r) => r.channel.provider === provider && r.channel.status === 'enabled');
    const states = channels.map((r) => this.runtimes.runtime(r.channel).breaker.state);
    const circuit: BreakerState = states.length === 0 || states.includes('closed') ? 'closed' : states.includes('half_open') ? 'half_open' : 'open';
    const inFlight = channels.reduce((sum, r) => sum + this.runtimes.runtime(r.channel).inFlight, 0);
    return { circuit, in_flight: inFlight, ...this.runtimes.statsOf(provider).snapshot() };
  }

  /** Every channel's health, or only `channelId`'s. */
  async health(channelId?: string): Promise<ChannelHealth[]> {
    const now = this.deps.clock.now();
    const channels = (await this.directory.channels()).filter((r) => channelId === undefined || r.channel.id === channelId);
    return Promise.all(
      channels.map(async ({ channel }) => {
        const runtime = this.runtimes.runtime(channel);
        const usage = await this.runtimes.limitsOf(channel).usage(channel.id, now);
        // The shared cool-down, or this replica's own (a store that could not be written).
        const coolingUntil = Math.max(usage.coolingUntil ?? 0, runtime.coolingUntil);
        return {
          channel,
          circuit: runtime.breaker.state,
          usage,
          coolingUntil: coolingUntil > now ? coolingUntil : null,
          stats: runtime.stats.snapshot(),
        };
      }),
    );
  }

  /**
   * One real call on the channel, outside its limits and breaker: one image of `entry`. A pass
   * re-enables an auto-disabled channel; an account error auto-disables it.
   */
  async test(channelId: string, entry: CatalogModel): Promise<ChannelTestOutcome> {
    this.directory.invalidate();
    const routable = (await this.directory.channels()).find((r) => r.channel.id === channelId);
    if (!routable) throw new ApiError('channel_not_found', `No channel with id ${channelId}.`, { param: 'id' });
    const { channel, client } = routable;
    const started = this.deps.clock.now();
    if (!client)
      return { ok: false, latencyMs: 0, error: new ApiError('provider_unavailable', 'The channel credentials cannot be opened: a sealing key is missing.') };
    const [width, height] = entry.default_size.split('x').map(Number) as [number, number];
    try {
      await client.generate(
        {
          prompt: 'a small red circle on a white background',
          upstreamModel: channel.models.find((m) => m.model === entry.model)?.upstream_model ?? entry.upstream_model,
          transport: channel.transport,
          upstreamOptions: entry.upstream_options,
          n: 1,
          width,
          height,
          responseFormat: 'url',
        },
        AbortSignal.timeout(channel.timeoutMs),
      );
    } catch (error) {
      const apiError = error instanceof ApiError ? error : new ApiError('provider_timeout', `The channel did not answer within ${channel.timeoutMs / 1000} s.`);
      if (error instanceof UpstreamError && error.traits.accountProblem) await this.directory.autoDisable(channel, error);
      return { ok: false, latencyMs: this.deps.clock.now() - started, error: apiError };
    }
    if (channel.status === 'auto_disabled') await this.directory.reEnable(channel);
    this.runtimes.runtime(channel).breaker.onSuccess();
    return { ok: true, latencyMs: this.deps.clock.now() - started };
  }

  /**
   * Every `intervalMs`, tests the auto-disabled channels and re-enables those that pass: on one
   * replica at a time, once an interval across all of them (see probeOnce).
   */
  startProbe(intervalMs: number, catalog: ReadonlyMap<string, CatalogModel>): void {
    if (intervalMs <= 0) return;
    this.probeTimer = setInterval(() => {
      this.probeOnce(intervalMs, catalog).catch((error: unknown) => this.deps.logger.warn({ err: error }, 'channel probe failed'));
    }, intervalMs);
    this.probeTimer.unref();
  }

  /**
   * One probe round, if this replica takes the shared probe lease (else another replica probes or
   * did within the interval). The lease covers the round (each test is bounded by its channel's
   * timeout), then is left to run out `intervalMs` after the round began, so the next round, on
   * whichever replica, starts an interval later. True when this replica probed.
   */
  async probeOnce(intervalMs: number, catalog: ReadonlyMap<string, CatalogModel>): Promise<boolean> {
    if (this.probing) return false;
    this.probing = true;
    try {
      this.directory.invalidate();
      const due = (await this.directory.channels())
        .map(({ channel }) => ({ channel, entry: catalog.get(channel.models[0]?.model ?? '') }))
        .filter(
          (c): c is { channel: Channel; entry: CatalogModel } => c.channel.status === 'auto_disabled' && c.channel.source === 'api' && c.entry !== undefined,
        );
      if (due.length === 0) return false;
      const started = this.deps.clock.now();
      const holder = randomBytes(9).toString('base64url');
      const roundMs = due.reduce((sum, c) => sum + c.channel.timeoutMs, 0) + LEASE_GRACE_MS;
      if (!(await this.deps.sharedLimits.takeLease(PROBE_LEASE, holder, started + Math.max(intervalMs, roundMs), started))) return false;
      try {
        for (const { channel, entry } of due) {
          const outcome = await this.test(channel.id, entry).catch(() => undefined);
          this.deps.logger.info({ channel_id: channel.id, ok: outcome?.ok ?? false }, 'probed an auto-disabled channel');
        }
      } finally {
        await this.deps.sharedLimits.endLeaseAt(PROBE_LEASE, holder, started + intervalMs, this.deps.clock.now());
      }
      return true;
    } finally {
      this.probing = false;
    }
  }

  stopProbe(): void {
    if (this.probeTimer) clearInterval(this.probeTimer);
  }
}
