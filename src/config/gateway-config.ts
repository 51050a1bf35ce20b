import { readTelemetry } from '../telemetry/telemetry-config';
import { readConsoleSso } from '../console-sso/sso-config';
import fs from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { DEFAULT_CATALOG, extendCatalog, parseCatalog, priceCatalog, type CatalogModel } from './catalog';
import { DEFAULT_CONVERSION } from '../pricing/catalog-prices';
import { ConfigError } from './config-error';
import { dataDirectory, resolveDevSecrets, type ServiceToken } from './dev-secrets';
import { accountSchema, envSchema, providerPrefix, providerSchema, readEnv, type EnvValues } from './env-schema';
import { splitList } from './env-types';
import { ALL_ADMIN_SCOPES, type AdminScope } from '../admin-tokens/admin-token.model';
import type { ResilienceSettings } from '../channels/resilience/resilience-settings';
import type { S3ImageStoreSettings } from '../images/s3-image-store';
import type { EnvironmentAccount, ProviderDescriptor } from '../providers/descriptor';
import { BUILT_IN_PROVIDERS, defaultFormatOf, descriptorOf, FORMATS, formatsOf } from '../providers/formats';

export type { ServiceToken } from './dev-secrets';

type Env = Record<string, string | undefined>;

/**
 * The model catalog: MODEL_CATALOG, else MODEL_CATALOG_FILE, changing or replacing the built-in one,
 * its money prices in credits at CREDITS_PER_USD and PRICE_MARKUP.
 */
export function readCatalog(
  values: Pick<EnvValues, 'MODEL_CATALOG' | 'MODEL_CATALOG_FILE'> & Partial<Pick<EnvValues, 'CREDITS_PER_USD' | 'PRICE_MARKUP'>>,
): CatalogModel[] {
  const conversion = { creditsPerUsd: values.CREDITS_PER_USD ?? DEFAULT_CONVERSION.creditsPerUsd, markup: values.PRICE_MARKUP ?? DEFAULT_CONVERSION.markup };
  const inline = values.MODEL_CATALOG;
  const file = values.MODEL_CATALOG_FILE;
  if (inline === undefined && file === undefined) return priceCatalog(DEFAULT_CATALOG, conversion);
  const source = inline !== undefined ? 'MODEL_CATALOG' : `MODEL_CATALOG_FILE (${file})`;
  let models: CatalogModel[];
  try {
    const raw: unknown = JSON.parse(inline ?? fs.readFileSync(file as string, 'utf8'));
    models = Array.isArray(raw) ? parseCatalog(raw) : extendCatalog(raw);
  } catch (error) {
    throw new ConfigError(`${source} is invalid: ${(error as Error).message}`);
  }
  return priceCatalog(models, conversion);
}

function bothOrNeither(values: EnvValues, a: keyof EnvValues, b: keyof EnvValues): boolean {
  if ((values[a] !== undefined) !== (values[b] !== undefined)) throw new ConfigError(`set both ${a} and ${b}, or neither`);
  return values[a] !== undefined;
}

function rateLimitStore(values: EnvValues): NonNullable<EnvValues['RATE_LIMIT_STORE']> {
  const chosen = values.RATE_LIMIT_STORE;
  if (chosen === undefined) {
    if (values.REDIS_URL !== undefined) return 'redis';
    return values.DATABASE_URL.startsWith('postgres') ? 'sql' : 'memory';
  }
  if (chosen === 'redis' && values.REDIS_URL === undefined) throw new ConfigError('RATE_LIMIT_STORE=redis needs REDIS_URL');
  return chosen;
}

/**
 * The soft limit on open files of this process (Linux: /proc/self/limits), or undefined where unknown.
 * Every connection is a file descriptor, so the connection cap is derived from it.
 */
function openFilesLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return line?.[1] && line[1] !== 'unlimited' ? Number(line[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Connections may take the descriptors the process does not need for itself: stdio, the event
 * loop, SQLite's three files, the database pool, Redis, the logger (about 30 in all), with room to spare.
 */
function maxConnections(values: EnvValues): number {
  const limit = openFilesLimit();
  const derived = limit === undefined ? 10_000 : Math.max(16, limit - 64 - values.DB_POOL_SIZE);
  const chosen = values.MAX_CONNECTIONS ?? derived;
  if (limit !== undefined && chosen > derived) {
    throw new ConfigError(
      `MAX_CONNECTIONS=${chosen} leaves no file descriptors for the gateway itself (open files limit ${limit}); raise the limit (ulimit -n / LimitNOFILE) or lower MAX_CONNECTIONS to at most ${derived}`,
    );
  }
  return chosen;
}

/**
 * A format's environment account, when its credential variables are set: all of them or none, and a
 * base URL when the format has no default.
 */
function environmentAccount(descriptor: ProviderDescriptor, values: Readonly<Record<string, unknown>>): EnvironmentAccount | undefined {
  const spec = descriptor.environment;
  if (!spec || descriptor.offline) return undefined;
  const credentialVariables = Object.entries(spec.credentials);
  const set = credentialVariables.filter(([, variable]) => values[variable] !== undefined);
  const baseUrl = (spec.baseUrl === undefined ? undefined : values[spec.baseUrl]) as string | undefined;
  const needed = [
    ...credentialVariables.map(([, variable]) => variable),
    ...(spec.baseUrl !== undefined && descriptor.defaultBaseUrl === undefined ? [spec.baseUrl] : []),
  ];
  const given = needed.filter((variable) => values[variable] !== undefined);
  if (given.length === 0) return undefined;
  if (set.length < credentialVariables.length || given.length < needed.length) {
    throw new ConfigError(needed.length === 2 ? `set both ${needed[0]} and ${needed[1]}, or neither` : `set all of ${needed.join(', ')}, or none`);
  }
  const provider = spec.providerName !== undefined ? (values[spec.providerName] as string) : (descriptor.providers[0] as string);
  if (descriptor.generic && BUILT_IN_PROVIDERS.includes(provider)) {
    throw new ConfigError(`${spec.providerName} must name a provider other than the built-in ${BUILT_IN_PROVIDERS.join(', ')}, got "${provider}"`);
  }
  const pascal = provider
    .split(/[^0-9A-Za-z]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('');
  return {
    format: descriptor.format,
    provider,
    baseUrl: baseUrl ?? descriptor.defaultBaseUrl,
    credentials: Object.fromEntries(credentialVariables.map(([field, variable]) => [field, values[variable] as string])),
    channelId: spec.channelId ?? `chn_env${pascal}`,
  };
}

/** Whether catalog `model` names a wire format that serves its provider, or needs none. */
function checkCatalogFormat(model: CatalogModel): void {
  if (model.transport !== undefined) {
    const descriptor = descriptorOf(model.transport);
    if (!descriptor || !(descriptor.providers.includes(model.provider) || (descriptor.generic && !BUILT_IN_PROVIDERS.includes(model.provider)))) {
      throw new ConfigError(
        `catalog model ${model.model}: transport "${model.transport}" does not serve provider "${model.provider}" (it is served over ${formatsOf(model.provider)
          .map((f) => `"${f.format}"`)
          .join(' or ')})`,
      );
    }
  } else if (!defaultFormatOf(model.provider)) {
    const formats = formatsOf(model.provider).map((f) => `"${f.format}"`);
    throw new ConfigError(`catalog model ${model.model}: ${model.provider} models need "transport": ${formats.join(' or ')}`);
  }
}

/** A provider's guard: its PROVIDER_<NAME>_* settings, PROVIDER_TIMEOUT_MS where its deadline is unset. */
function resilienceOf(settings: z.output<typeof providerSchema>, defaultTimeoutMs: number): ResilienceSettings {
  return {
    timeoutMs: settings.TIMEOUT_MS ?? defaultTimeoutMs,
    maxAttempts: settings.MAX_ATTEMPTS,
    retryBaseDelayMs: settings.RETRY_BASE_DELAY_MS,
    maxConcurrent: settings.MAX_CONCURRENCY,
    breakerThreshold: settings.BREAKER_THRESHOLD,
    breakerCooldownMs: settings.BREAKER_COOLDOWN_MS,
  };
}

/** The environment accounts of every format, and per-provider resilience; PROVIDER_<NAME>_* override the defaults. */
function readProviders(env: Env, values: EnvValues, catalog: CatalogModel[]) {
  const accountValues: Record<string, unknown> = readEnv(accountSchema, env);
  const accounts = FORMATS.flatMap((descriptor) => environmentAccount(descriptor, accountValues) ?? []);
  const names = [...new Set([...BUILT_IN_PROVIDERS, ...accounts.map((account) => account.provider)])];
  for (const model of catalog) {
    if (!names.includes(model.provider)) {
      throw new ConfigError(`catalog model ${model.model} uses provider "${model.provider}", which is not configured (known: ${names.join(', ')})`);
    }
    checkCatalogFormat(model);
  }
  const settings = names.map((name) => [name, readEnv(providerSchema, env, (setting) => `${providerPrefix(name)}${setting}`)] as const);
  const resilience: Record<string, ResilienceSettings> = Object.fromEntries(
    settings.map(([name, own]) => [name, resilienceOf(own, values.PROVIDER_TIMEOUT_MS)]),
  );
  return {
    /** Per provider name: the hosts its image URLs may point at besides its documented ones (PROVIDER_<NAME>_IMAGE_HOSTS). */
    imageHosts: Object.fromEntries(settings.map(([name, own]) => [name, splitList(own.IMAGE_HOSTS ?? '').map((host) => host.toLowerCase())])),
    /** Every format's account configured by environment variables (their descriptors name them), in registry order. */
    accounts,
    /** Per provider name: deadline, retries, concurrency, breaker. */
    resilience,
    /** A provider's guard where none of its PROVIDER_<NAME>_* is set (and for a provider not named above). */
    defaultResilience: resilienceOf(readEnv(providerSchema, {}), values.PROVIDER_TIMEOUT_MS),
    /** Deadline of the TCP connect to an upstream (UPSTREAM_CONNECT_TIMEOUT_MS); past it, the call may fail over. */
    connectTimeoutMs: values.UPSTREAM_CONNECT_TIMEOUT_MS,
    /** How long an idle upstream connection is kept (UPSTREAM_KEEP_ALIVE_MS). */
    keepAliveMs: values.UPSTREAM_KEEP_ALIVE_MS,
    /** How often an accepted upstream task is polled (UPSTREAM_POLL_INTERVAL_MS). */
    pollIntervalMs: values.UPSTREAM_POLL_INTERVAL_MS ?? values.VOLC_POLL_INTERVAL_MS ?? 1000,
    /** LOCAL_PROVIDER_MODE: `tiny` answers a fixed 1x1 PNG (benchmarks); anything else renders. */
    localMode: values.LOCAL_PROVIDER_MODE === 'tiny' ? ('tiny' as const) : ('render' as const),
  };
}

/** CF_ACCESS_TEAM_DOMAIN + CF_ACCESS_AUD (both or neither), CF_ACCESS_JWKS_URL optional. */
function readAccessJwt(values: EnvValues) {
  if (!bothOrNeither(values, 'CF_ACCESS_TEAM_DOMAIN', 'CF_ACCESS_AUD')) {
    if (values.CF_ACCESS_ADMIN_SCOPES.length > 0) throw new ConfigError('CF_ACCESS_ADMIN_SCOPES needs CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD');
    return undefined;
  }
  const domain = (values.CF_ACCESS_TEAM_DOMAIN as string).trim();
  let issuer: string;
  try {
    // `myteam.cloudflareaccess.com` or `https://myteam.cloudflareaccess.com`: the issuer is the origin.
    issuer = new URL(/^https?:\/\//.test(domain) ? domain : `https://${domain}`).origin;
  } catch {
    throw new ConfigError(`CF_ACCESS_TEAM_DOMAIN must be a host name like myteam.cloudflareaccess.com, got "${domain}"`);
  }
  const audiences = splitList(values.CF_ACCESS_AUD as string);
  if (audiences.length === 0) throw new ConfigError('CF_ACCESS_AUD must name at least one application AUD tag');
  const unknownScope = values.CF_ACCESS_ADMIN_SCOPES.find((scope) => !(ALL_ADMIN_SCOPES as readonly string[]).includes(scope));
  if (unknownScope !== undefined) throw new ConfigError(`CF_ACCESS_ADMIN_SCOPES: "${unknownScope}" is not an admin scope (${ALL_ADMIN_SCOPES.join(', ')})`);
  const adminAudiences = values.CF_ACCESS_ADMIN_AUD === undefined ? audiences : splitList(values.CF_ACCESS_ADMIN_AUD);
  if (adminAudiences.length === 0) throw new ConfigError('CF_ACCESS_ADMIN_AUD must name at least one application AUD tag');
  return {
    /** `https://<team>.cloudflareaccess.com`: the JWT's `iss`. */
    issuer,
    /** The Access application's AUD tag(s): the JWT's `aud` must name one. */
    audiences,
    /** The team's signing keys, `<issuer>/cdn-cgi/access/certs` unless set. */
    jwksUrl: values.CF_ACCESS_JWKS_URL ?? `${issuer}/cdn-cgi/access/certs`,
    /** The scopes an Access JWT holds on the admin API; empty = it opens no admin operation. */
    adminScopes: values.CF_ACCESS_ADMIN_SCOPES as AdminScope[],
    /** The AUD tag(s) an Access JWT must name on the admin API (the console's Access application). */
    adminAudiences,
  };
}

function readImageStore(values: EnvValues): { kind: 'directory'; directory: string; timeoutMs: number } | ({ kind: 's3' } & S3ImageStoreSettings) {
  const timeoutMs = values.IMAGE_STORE_TIMEOUT_MS;
  if (values.IMAGE_STORE === 'directory') {
    return { kind: 'directory', directory: path.resolve(values.IMAGE_DIRECTORY ?? path.join(dataDirectory(values.DATABASE_URL), 'images')), timeoutMs };
  }
  if (values.IMAGE_S3_BUCKET === undefined) throw new ConfigError('IMAGE_STORE=s3 needs IMAGE_S3_BUCKET');
  const endpoint = values.IMAGE_S3_ENDPOINT;
  return {
    kind: 's3',
    bucket: values.IMAGE_S3_BUCKET,
    prefix: values.IMAGE_S3_PREFIX,
    region: values.IMAGE_S3_REGION,
    endpoint,
    forcePathStyle: values.IMAGE_S3_FORCE_PATH_STYLE ?? endpoint !== undefined,
    credentials: bothOrNeither(values, 'IMAGE_S3_ACCESS_KEY_ID', 'IMAGE_S3_SECRET_ACCESS_KEY')
      ? { accessKeyId: values.IMAGE_S3_ACCESS_KEY_ID as string, secretAccessKey: values.IMAGE_S3_SECRET_ACCESS_KEY as string }
      : undefined,
    timeoutMs,
  };
}

/** CF_ACCESS_CLIENT_ID / CF_ACCESS_CLIENT_SECRET, comma-separated for several pairs. */
function givenServiceTokens(values: EnvValues): ServiceToken[] {
  const ids = values.CF_ACCESS_CLIENT_ID;
  const secrets = values.CF_ACCESS_CLIENT_SECRET;
  if (ids.length !== secrets.length) throw new ConfigError('CF_ACCESS_CLIENT_ID and CF_ACCESS_CLIENT_SECRET must list the same number of values');
  if (secrets.some((secret) => secret.length < 16)) throw new ConfigError('every CF_ACCESS_CLIENT_SECRET must be at least 16 characters');
  return ids.map((clientId, i) => ({ clientId, clientSecret: secrets[i] as string }));
}

/**
 * The gateway's configuration as the schema makes it of `env`: every variable parsed
 * (src/config/env-schema.ts), checked across variables, put in its group, and the secrets it lacks
 * generated outside production (src/config/dev-secrets.ts). `env` is read again for the variables
 * whose names the schema cannot know beforehand (PROVIDER_<NAME>_* of each configured provider).
 */
export function configSchema(env: Env, announce: (line: string) => void) {
  return envSchema.transform((values) => {
    const catalog = readCatalog(values);
    const providers = readProviders(env, values, catalog);
    const store = readImageStore(values);
    const given = {
      adminSecret: values.ADMIN_SECRET,
      serviceTokens: givenServiceTokens(values),
      sealingKeys: values.CHANNEL_SEALING_KEY,
      imageSigningKey: values.IMAGE_URL_SIGNING_KEY,
    };
    const rateLimit = rateLimitStore(values);
    const accessJwt = readAccessJwt(values);
    const connections = maxConnections(values);
    const secrets = resolveDevSecrets(given, values.NODE_ENV, values.DATABASE_URL, announce);
    return {
      nodeEnv: values.NODE_ENV,
      host: values.HOST,
      port: values.PORT,
      /** `sqlite:<path>`, a plain file path, or `postgres://...`. */
      databaseUrl: values.DATABASE_URL,
      adminSecret: secrets.adminSecret,
      logLevel: values.LOG_LEVEL,
      /** One info line per request; false drops it (errors still logged). */
      logRequests: values.LOG_REQUESTS,
      /** Check every response against the spec (on in tests; costs CPU). */
      validateResponses: values.VALIDATE_RESPONSES,
      bodyLimitBytes: values.BODY_LIMIT_BYTES,
      catalog,
      /** Credits per US dollar: what usage analytics' margins convert credits charged by. */
      creditsPerUsd: values.CREDITS_PER_USD,
      providers,
      /** Where request-per-minute windows live; see createRateLimiter. */
      rateLimitStore: rateLimit,
      redisUrl: values.REDIS_URL,
      /** Prefix of every Redis key, so several gateways (or test runs) can share one Redis. */
      redisPrefix: values.REDIS_PREFIX,
      /** PostgreSQL connections per process. */
      dbPoolSize: values.DB_POOL_SIZE,
      /** PostgreSQL: longest wait for a new connection (pool full counts too) before the request fails with 503. */
      dbConnectTimeoutMs: values.DB_CONNECT_TIMEOUT_MS,
      /** PostgreSQL: server-side statement_timeout; the client gives up on a whole operation (connection wait and every statement) one second later (hung or dead server, no RST). */
      dbStatementTimeoutMs: values.DB_STATEMENT_TIMEOUT_MS,
      /** Redis: longest wait for a (re)connection. */
      redisConnectTimeoutMs: values.REDIS_CONNECT_TIMEOUT_MS,
      /** Redis: longest wait for one command's answer (a hung Redis), then the request fails with 503. */
      redisCommandTimeoutMs: values.REDIS_COMMAND_TIMEOUT_MS,
      /** While Redis fails: refuse rate-limited requests with 503, or count them in the SQL limiter instead. */
      rateLimitRedisFallback: values.RATE_LIMIT_REDIS_FALLBACK,
      /** At startup, how long to retry an unreachable PostgreSQL or Redis before exiting with 78. */
      dependencyStartupTimeoutMs: values.DEPENDENCY_STARTUP_TIMEOUT_MS,
      /** After a dependency failed on the request path, /readyz says 503 for this long (then probes again). */
      readinessFailureWindowMs: values.READINESS_FAILURE_WINDOW_MS,
      /** How long SIGTERM waits for in-flight requests before cutting them. */
      shutdownTimeoutMs: values.SHUTDOWN_TIMEOUT_MS,
      /** Extra wait beyond the slowest provider deadline before a pending generation counts as abandoned. */
      sweepGraceMs: values.SWEEP_GRACE_MS,
      /** GENERATION_RETENTION_DAYS in milliseconds; undefined (0 days) keeps generation rows forever. */
      generationRetentionMs: values.GENERATION_RETENTION_DAYS === 0 ? undefined : values.GENERATION_RETENTION_DAYS * 86_400_000,
      /** PROMPT_RETENTION: what settled generations keep of their prompt (src/maintenance/prompt-retention.ts). */
      promptRetention: values.PROMPT_RETENTION,
      /** Second listener for the internal creative API. */
      internalPort: values.INTERNAL_PORT,
      /** Cloudflare-Access-style service tokens accepted on the internal API. */
      serviceTokens: secrets.serviceTokens,
      /** Cloudflare Access JWTs accepted on the internal API beside service tokens; undefined = not accepted. */
      accessJwt,
      /** Console single sign-on (CONSOLE_OIDC_ISSUERS); undefined = token sign-in only. */
      consoleSso: readConsoleSso(
        values.CONSOLE_OIDC_ISSUERS,
        { idleMinutes: values.CONSOLE_SESSION_IDLE_MINUTES, maxHours: values.CONSOLE_SESSION_MAX_HOURS },
        values.NODE_ENV,
      ),
      /** Stored images and their signed URLs (docs/clients/image-storage.md). */
      images: {
        store,
        retentionMs: values.IMAGE_RETENTION_HOURS * 3_600_000,
        /** HMAC key of image URLs; the same on every replica. */
        signingKey: secrets.imageSigningKey,
        /** Where clients reach the gateway, for the URLs; the listening address when unset. */
        publicBaseUrl: values.PUBLIC_BASE_URL?.replace(/\/+$/, ''),
        maxBytes: values.IMAGE_MAX_BYTES,
        fetchTimeoutMs: values.IMAGE_FETCH_TIMEOUT_MS,
        /** Hosts (or `*.domain`, https only) every provider's image URLs may point at, besides its documented ones and its own base URL's host. */
        allowedHosts: splitList(values.IMAGE_FETCH_ALLOWED_HOSTS).map((host) => host.toLowerCase()),
      },
      /** Channels (upstream accounts): credential sealing keys and routing settings. */
      channels: {
        /** 32-byte AES-256-GCM keys, newest first: the first seals, all of them open. */
        sealingKeys: secrets.sealingKeys,
        /** How long a request waits for a slot when every channel of its model is saturated. */
        queueTimeoutMs: values.CHANNEL_QUEUE_TIMEOUT_MS,
        /** How many calls of one model may wait in that queue on one replica; beyond, 503 at once. */
        queueMaxWaiters: values.CHANNEL_QUEUE_MAX_WAITERS,
        /** Period of the probe that re-enables auto-disabled channels that pass a test; 0 = off. */
        probeIntervalMs: values.CHANNEL_PROBE_INTERVAL_MS,
        /** How often an accepted upstream task is polled on API channels (UPSTREAM_POLL_INTERVAL_MS). */
        pollIntervalMs: providers.pollIntervalMs,
        /** Lets API channels' base URLs point at loopback/private/link-local addresses (self-hosted upstreams, tests). */
        allowPrivateUpstreams: values.CHANNEL_ALLOW_PRIVATE_UPSTREAMS,
      },
      /** TRUSTED_PROXIES: CIDRs of proxies whose X-Forwarded-For is believed (key allowed_ips). */
      trustedProxies: values.TRUSTED_PROXIES,
      /** OTEL_*: where traces go (src/telemetry/); off without an endpoint. */
      telemetry: readTelemetry(values),
      /** KEY_LEASE_TTL_MS: a dead replica's max_concurrent slots free after this. */
      keyLeaseTtlMs: values.KEY_LEASE_TTL_MS,
      /** IDEMPOTENCY_LEASE_MS: an Idempotency-Key's claim lapses after this without renewal, and a retry takes it over. */
      idempotencyLeaseMs: values.IDEMPOTENCY_LEASE_MS,
      /** Durable generations (GENERATION_*): worker lease, poll period, background concurrency, per-key queue cap. */
      generations: {
        /** A claim lapses after this long without renewal (its process died): another worker takes it over. */
        leaseMs: values.GENERATION_LEASE_MS,
        /** How often a worker looks for work queued on other replicas or left by a dead process. */
        pollMs: values.GENERATION_POLL_MS,
        /** Background generations one process runs at once. */
        workerConcurrency: values.GENERATION_WORKER_CONCURRENCY,
        /** Asynchronous generations one key may have queued at once. */
        maxQueuedPerKey: values.MAX_QUEUED_GENERATIONS_PER_KEY,
      },
      /** Event delivery (WEBHOOK_*). */
      webhooks: {
        /** Lets endpoints point at loopback/private/link-local addresses (development, tests). */
        allowPrivateNetworks: values.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
        pollIntervalMs: values.WEBHOOK_POLL_INTERVAL_MS,
        leaseMs: values.WEBHOOK_LEASE_MS,
        timeoutMs: values.WEBHOOK_TIMEOUT_MS,
        disableAfterMs: values.WEBHOOK_DISABLE_AFTER_HOURS * 3_600_000,
        keyExpiringDays: values.WEBHOOK_KEY_EXPIRING_DAYS,
        expiryScanIntervalMs: values.WEBHOOK_EXPIRY_SCAN_INTERVAL_MS,
      },
      /** Generation requests are refused (503 overloaded) while the event loop runs this much late; 0 = never. */
      shedEventLoopDelayMs: values.SHED_EVENT_LOOP_DELAY_MS,
      /** ... or while all work of the last half second waited this long for the database; 0 = never. */
      shedDatabaseWaitMs: values.SHED_DATABASE_WAIT_MS,
      /** A reservation that cannot start within this long, the database busy with earlier work, is refused (503 overloaded); 0 = never. */
      admissionDatabaseWaitMs: values.ADMISSION_DATABASE_WAIT_MS,
      /** A request's body must arrive within this long after its headers (slow-body attacks). */
      bodyTimeoutMs: values.BODY_TIMEOUT_MS,
      /** A request's headers must have arrived this long after its connection (or previous request) began (slow headers). */
      headersTimeoutMs: values.HEADERS_TIMEOUT_MS,
      /** The idle compaction's full collection runs only when at least this much of the heap is free. */
      idleCompactionMinFreeBytes: values.IDLE_COMPACTION_MIN_FREE_MB * 2 ** 20,
      /** Open client connections on both listeners together; past it the stalest idle or stalled one is closed. */
      maxConnections: connections,
    };
  });
}

/** Everything the gateway reads from its environment, validated once at startup (configSchema's output). */
export type GatewayConfig = z.output<ReturnType<typeof configSchema>>;
export type AccessJwtConfig = NonNullable<GatewayConfig['accessJwt']>;
