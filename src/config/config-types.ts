import type { S3ImageStoreSettings } from '../images/s3-image-store';
import type { ResilienceSettings } from '../channels/resilience/resilience-settings';
import type { CatalogModel } from './catalog';
import type { AdminScope } from '../admin-tokens/admin-token.model';
import type { EnvironmentAccount } from '../providers/descriptor';

export interface ProvidersConfig {
  /** Every format's account configured by environment variables (their descriptors name them), in registry order. */
  accounts: EnvironmentAccount[];
  /** How often an accepted upstream task is polled (UPSTREAM_POLL_INTERVAL_MS). */
  pollIntervalMs: number;
  /** Per provider name: deadline, retries, concurrency, breaker. */
  resilience: Record<string, ResilienceSettings>;
  /** Deadline of the TCP connect to an upstream (UPSTREAM_CONNECT_TIMEOUT_MS); past it, the call may fail over. */
  connectTimeoutMs: number;
}

/** Everything the gateway reads from its environment, validated once at startup. */
export interface GatewayConfig {
  nodeEnv: string;
  host: string;
  port: number;
  /** `sqlite:<path>`, a plain file path, or `postgres://...`. */
  databaseUrl: string;
  adminSecret: string;
  logLevel: string;
  /** Check every response against the spec (on in tests; costs CPU). */
  validateResponses: boolean;
  bodyLimitBytes: number;
  catalog: CatalogModel[];
  /** Where request-per-minute windows live; see createRateLimiter. */
  rateLimitStore: 'memory' | 'sql' | 'redis';
  redisUrl: string | undefined;
  /** Prefix of every Redis key, so several gateways (or test runs) can share one Redis. */
  redisPrefix: string;
  /** PostgreSQL connections per process. */
  dbPoolSize: number;
  /** PostgreSQL: longest wait for a new connection (pool full counts too) before the request fails with 503. */
  dbConnectTimeoutMs: number;
  /** PostgreSQL: server-side statement_timeout; the client gives up on a whole operation (connection wait and every statement) one second later (hung or dead server, no RST). */
  dbStatementTimeoutMs: number;
  /** Redis: longest wait for a (re)connection. */
  redisConnectTimeoutMs: number;
  /** Redis: longest wait for one command's answer (a hung Redis), then the request fails with 503. */
  redisCommandTimeoutMs: number;
  /** While Redis fails: refuse rate-limited requests with 503, or count them in the SQL limiter instead. */
  rateLimitRedisFallback: 'refuse' | 'sql';
  /** At startup, how long to retry an unreachable PostgreSQL or Redis before exiting with 78. */
  dependencyStartupTimeoutMs: number;
  /** After a dependency failed on the request path, /readyz says 503 for this long (then probes again). */
  readinessFailureWindowMs: number;
  providers: ProvidersConfig;
  /** How long SIGTERM waits for in-flight requests before cutting them. */
  shutdownTimeoutMs: number;
  /** Second listener for the internal creative API. */
  internalPort: number;
  /** Cloudflare-Access-style service tokens accepted on the internal API. */
  serviceTokens: ServiceToken[];
  /** Extra wait beyond the slowest provider deadline before a pending generation counts as abandoned. */
  sweepGraceMs: number;
  /** GENERATION_RETENTION_DAYS in milliseconds; undefined (0 days) keeps generation rows forever. */
  generationRetentionMs: number | undefined;
  /** Cloudflare Access JWTs accepted on the internal API beside service tokens; undefined = not accepted. */
  accessJwt: AccessJwtConfig | undefined;
  /** Stored images and their signed URLs (docs/clients/image-storage.md). */
  images: ImagesConfig;
  /** Channels (upstream accounts): credential sealing keys and routing settings. */
  channels: ChannelsConfig;
  /** A request's body must arrive within this long after its headers (slow-body attacks). */
  bodyTimeoutMs: number;
  /** A request's headers must have arrived this long after its connection (or previous request) began (slow headers). */
  headersTimeoutMs: number;
  /** The idle compaction's full collection runs only when at least this much of the heap is free. */
  idleCompactionMinFreeBytes: number;
  /** Open client connections on both listeners together; past it the stalest idle or stalled one is closed. */
  maxConnections: number;
  /** TRUSTED_PROXIES: CIDRs of proxies whose X-Forwarded-For is believed (key allowed_ips). */
  trustedProxies: string[];
  /** KEY_LEASE_TTL_MS: a dead replica's max_concurrent slots free after this. */
  keyLeaseTtlMs: number;
  /** Durable generations (GENERATION_*): worker lease, poll period, background concurrency, per-key queue cap. */
  generations: GenerationSettings;
  webhooks: WebhookSettings;
}

export interface AccessJwtConfig {
  /** `https://<team>.cloudflareaccess.com`: the JWT's `iss`. */
  issuer: string;
  /** The Access application's AUD tag(s): the JWT's `aud` must name one. */
  audiences: string[];
  /** The team's signing keys, `<issuer>/cdn-cgi/access/certs` unless set. */
  jwksUrl: string;
  /** The scopes an Access JWT holds on the admin API; empty = it opens no admin operation. */
  adminScopes: AdminScope[];
  /** The AUD tag(s) an Access JWT must name on the admin API (the console's Access application). */
  adminAudiences: string[];
}

export interface ImagesConfig {
  store: { kind: 'directory'; directory: string } | ({ kind: 's3' } & S3ImageStoreSettings);
  retentionMs: number;
  /** HMAC key of image URLs; the same on every replica. */
  signingKey: string;
  /** Where clients reach the gateway, for the URLs; the listening address when unset. */
  publicBaseUrl: string | undefined;
  maxBytes: number;
  fetchTimeoutMs: number;
  /** Hosts (or `*.domain`) every provider's image URLs may point at, besides its own base URL's host. */
  allowedHosts: string[];
}

export interface ChannelsConfig {
  /** 32-byte AES-256-GCM keys, newest first: the first seals, all of them open. */
  sealingKeys: Buffer[];
  /** How long a request waits for a slot when every channel of its model is saturated. */
  queueTimeoutMs: number;
  /** How many calls of one model may wait in that queue on one replica; beyond, 503 at once. */
  queueMaxWaiters: number;
  /** Period of the probe that re-enables auto-disabled channels that pass a test; 0 = off. */
  probeIntervalMs: number;
  /** How often an accepted upstream task is polled on API channels (UPSTREAM_POLL_INTERVAL_MS). */
  pollIntervalMs: number;
  /** Lets API channels' base URLs point at loopback/private/link-local addresses (self-hosted upstreams, tests). */
  allowPrivateUpstreams: boolean;
}

export interface GenerationSettings {
  /** A claim lapses after this long without renewal (its process died): another worker takes it over. */
  leaseMs: number;
  /** How often a worker looks for work queued on other replicas or left by a dead process. */
  pollMs: number;
  /** Background generations one process runs at once. */
  workerConcurrency: number;
  /** Asynchronous generations one key may have queued at once. */
  maxQueuedPerKey: number;
}

/** Event delivery (WEBHOOK_*). */
export interface WebhookSettings {
  /** Lets endpoints point at loopback/private/link-local addresses (development, tests). */
  allowPrivateNetworks: boolean;
  pollIntervalMs: number;
  leaseMs: number;
  timeoutMs: number;
  disableAfterMs: number;
  keyExpiringDays: number;
  expiryScanIntervalMs: number;
}

export interface ServiceToken {
  clientId: string;
  clientSecret: string;
}
