import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import type { ProviderRegistry } from '../providers/registry';
import type { Clock } from '../shared/clock';
import type { ChannelCaps, ChannelLimitStore } from './channel-limits';
import type { Channel } from './channel.model';
import type { CredentialSealer } from './channel-sealing';
import { CircuitBreaker } from './resilience/circuit-breaker';
import { ProviderStats } from './resilience/provider-stats';
import type { ResilienceSettings } from './resilience/resilience-settings';

export interface ChannelRouterDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  logger: Logger;
  sealer: CredentialSealer;
  /** Environment-configured channels and the providers that serve them. */
  environment: { channels: Channel[]; providers: ProviderRegistry };
  resilience: Record<string, ResilienceSettings>;
  /** A provider's guard when it has none of its own (the PROVIDER_<NAME>_* defaults). */
  defaultResilience: ResilienceSettings;
  /** Limits of API channels: shared by every replica (Redis or SQL). */
  sharedLimits: ChannelLimitStore;
  /** Limits of environment channels: per process, since PROVIDER_<NAME>_MAX_CONCURRENCY caps each process. */
  localLimits: ChannelLimitStore;
  queueTimeoutMs: number;
  /** How many calls of one model may wait for a slot on this replica; beyond, 503 at once. */
  queueMaxWaiters: number;
  pollIntervalMs: number;
  /** CHANNEL_ALLOW_PRIVATE_UPSTREAMS: else API channels connect to public addresses only. */
  allowPrivateUpstreams: boolean;
}

/** A slot outlives its call's deadline by this much before it is presumed lost with its replica. */
export const LEASE_GRACE_MS = 2000;

/** What this replica knows about a channel beyond the database: breaker, cool-down, recent calls. */
export interface ChannelRuntime {
  breaker: CircuitBreaker;
  stats: ProviderStats;
  coolingUntil: number;
  inFlight: number;
}

/** The per-replica state and settings that routing, the wait line and health reports share. */
export class ChannelRuntimes {
  private readonly runtimes = new Map<string, ChannelRuntime>();
  private readonly providerStats = new Map<string, ProviderStats>();

  constructor(private readonly deps: Pick<ChannelRouterDeps, 'clock' | 'resilience' | 'defaultResilience' | 'sharedLimits' | 'localLimits'>) {}

  runtime(channel: Channel): ChannelRuntime {
    let runtime = this.runtimes.get(channel.id);
    if (!runtime) {
      const settings = this.settingsOf(channel.provider);
      runtime = {
        breaker: new CircuitBreaker(settings.breakerThreshold, settings.breakerCooldownMs, this.deps.clock),
        stats: new ProviderStats(),
        coolingUntil: 0,
        inFlight: 0,
      };
      this.runtimes.set(channel.id, runtime);
    }
    return runtime;
  }

  settingsOf(provider: string): ResilienceSettings {
    return this.deps.resilience[provider] ?? this.deps.defaultResilience;
  }

  limitsOf(channel: Channel): ChannelLimitStore {
    return channel.source === 'environment' ? this.deps.localLimits : this.deps.sharedLimits;
  }

  caps(channel: Channel): ChannelCaps {
    return { maxConcurrency: channel.maxConcurrency, rpm: channel.rpm, ipm: channel.ipm, leaseMs: channel.timeoutMs + LEASE_GRACE_MS };
  }

  /** A provider's requests' outcomes on this replica, whichever channels served them. */
  statsOf(provider: string): ProviderStats {
    let stats = this.providerStats.get(provider);
    if (!stats) {
      stats = new ProviderStats();
      this.providerStats.set(provider, stats);
    }
    return stats;
  }
}
