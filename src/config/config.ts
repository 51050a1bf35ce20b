import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseCidr } from '../shared/cidr';
import { randomBase62 } from '../shared/ids';
import type { S3ImageStoreSettings } from '../images/s3-image-store';
import type { ResilienceSettings } from '../channels/resilience/resilience-settings';
import { DEFAULT_CATALOG, parseCatalog, type CatalogModel } from './catalog';

export interface ProvidersConfig {
  volc?: { accessKeyId: string; secretAccessKey: string; endpoint: string; pollIntervalMs: number };
  ark?: { apiKey: string; baseUrl: string };
  openaiCompatible?: { name: string; baseUrl: string; apiKey: string };
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
  /** Poll interval of visual tasks on API channels (VOLC_POLL_INTERVAL_MS). */
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

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  return raw as T;
}

function readCatalog(env: Env): CatalogModel[] {
  const inline = env.MODEL_CATALOG;
  const file = env.MODEL_CATALOG_FILE;
  if (!inline && !file) return DEFAULT_CATALOG;
  const source = inline ? 'MODEL_CATALOG' : `MODEL_CATALOG_FILE (${file})`;
  try {
    const text = inline ?? fs.readFileSync(file as string, 'utf8');
    return parseCatalog(JSON.parse(text));
  } catch (error) {
    throw new ConfigError(`${source} is invalid: ${(error as Error).message}`);
  }
}

/** Directory for local state (SQLite file, generated admin secret). */
export function dataDirectory(databaseUrl: string): string {
  if (databaseUrl.startsWith('postgres')) return path.resolve('data');
  return path.dirname(path.resolve(databaseUrl.replace(/^sqlite:/, '')));
}

/**
 * Outside production a missing ADMIN_SECRET is generated once, kept in the data directory
 * (mode 0600) and printed once, so `npm start` works with zero configuration.
 */
function resolveAdminSecret(env: Env, nodeEnv: string, databaseUrl: string, announce: (line: string) => void): string {
  const given = env.ADMIN_SECRET;
  if (given !== undefined && given !== '') {
    if (given.length < 16) throw new ConfigError('ADMIN_SECRET must be at least 16 characters');
    return given;
  }
  if (nodeEnv === 'production') throw new ConfigError('ADMIN_SECRET is required when NODE_ENV=production');
  const file = path.join(dataDirectory(databaseUrl), 'admin-secret');
  if (fs.existsSync(file)) {
    announce(`Using the admin secret stored in ${file}`);
    return fs.readFileSync(file, 'utf8').trim();
  }
  const secret = `adm_${randomBase62(40)}`;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  announce(`Generated an admin secret (stored in ${file}, shown only now):\n\n    ADMIN_SECRET=${secret}\n`);
  return secret;
}

/**
 * CF_ACCESS_CLIENT_ID / CF_ACCESS_CLIENT_SECRET, comma-separated for several pairs. Outside
 * production a missing pair is generated once, kept in the data directory (0600) and printed once.
 */
function resolveServiceTokens(env: Env, nodeEnv: string, databaseUrl: string, announce: (line: string) => void): ServiceToken[] {
  const ids = (env.CF_ACCESS_CLIENT_ID ?? '').split(',').map((v) => v.trim()).filter(Boolean);
  const secrets = (env.CF_ACCESS_CLIENT_SECRET ?? '').split(',').map((v) => v.trim()).filter(Boolean);
  if (ids.length !== secrets.length) throw new ConfigError('CF_ACCESS_CLIENT_ID and CF_ACCESS_CLIENT_SECRET must list the same number of values');
  if (ids.length > 0) {
    if (secrets.some((secret) => secret.length < 16)) throw new ConfigError('every CF_ACCESS_CLIENT_SECRET must be at least 16 characters');
    return ids.map((clientId, i) => ({ clientId, clientSecret: secrets[i] as string }));
  }
  if (nodeEnv === 'production') throw new ConfigError('CF_ACCESS_CLIENT_ID and CF_ACCESS_CLIENT_SECRET are required when NODE_ENV=production');
  const file = path.join(dataDirectory(databaseUrl), 'service-token');
  if (fs.existsSync(file)) {
    const [clientId, clientSecret] = fs.readFileSync(file, 'utf8').trim().split('\n');
    if (clientId && clientSecret) {
      announce(`Using the internal API service token stored in ${file}`);
      return [{ clientId, clientSecret }];
    }
  }
  const token = { clientId: `svc_${randomBase62(16)}.access`, clientSecret: randomBase62(48) };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${token.clientId}\n${token.clientSecret}\n`, { mode: 0o600 });
  announce(
    `Generated a service token for the internal API (stored in ${file}, shown only now):\n\n    CF-Access-Client-Id: ${token.clientId}\n    CF-Access-Client-Secret: ${token.clientSecret}\n`,
  );
  return [token];
}

/** A sealing key: 64 hex characters or base64 of 32 bytes. */
function sealingKey(raw: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  if (key.length !== 32) throw new ConfigError('every CHANNEL_SEALING_KEY entry must be 32 bytes, as 64 hex characters or base64');
  return key;
}

/**
 * CHANNEL_SEALING_KEY: comma-separated keys, newest first (rotation: put the new key first on every
 * replica; each re-seals channel credentials as it reads the channel list and webhook secrets at
 * startup; then drop the old one, docs/operators/channels.md). Outside production a missing key is generated once into the
 * data directory (0600), like the admin secret.
 */
function resolveSealingKeys(env: Env, nodeEnv: string, databaseUrl: string, announce: (line: string) => void): Buffer[] {
  const given = (env.CHANNEL_SEALING_KEY ?? '').split(',').map((v) => v.trim()).filter(Boolean);
  if (given.length > 0) return given.map(sealingKey);
  if (nodeEnv === 'production') throw new ConfigError('CHANNEL_SEALING_KEY is required when NODE_ENV=production (openssl rand -hex 32)');
  const file = path.join(dataDirectory(databaseUrl), 'channel-sealing-key');
  if (fs.existsSync(file)) return [sealingKey(fs.readFileSync(file, 'utf8').trim())];
  const key = randomBytes(32).toString('hex');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${key}\n`, { mode: 0o600 });
  announce(`Generated a channel sealing key (stored in ${file}); set CHANNEL_SEALING_KEY to it on every replica.`);
  return [sealingKey(key)];
}

function rateLimitStore(env: Env, databaseUrl: string): GatewayConfig['rateLimitStore'] {
  const chosen = env.RATE_LIMIT_STORE;
  if (chosen === undefined || chosen === '') {
    if (env.REDIS_URL) return 'redis';
    return databaseUrl.startsWith('postgres') ? 'sql' : 'memory';
  }
  if (chosen !== 'memory' && chosen !== 'sql' && chosen !== 'redis') {
    throw new ConfigError(`RATE_LIMIT_STORE must be memory, sql or redis, got "${chosen}"`);
  }
  if (chosen === 'redis' && !env.REDIS_URL) throw new ConfigError('RATE_LIMIT_STORE=redis needs REDIS_URL');
  return chosen;
}

const DATABASE_URL_FORMS = 'a SQLite file path (./data/gateway.db), sqlite:<path>, or postgres://user:password@host:5432/database';

/**
 * A file path, `sqlite:<path>` or `postgres(ql)://`. Anything else with a scheme (`mysql://...`)
 * would otherwise become a SQLite file named after it.
 */
export function databaseUrlFromEnv(env: Env): string {
  const raw = env.DATABASE_URL || './data/gateway.db';
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(raw)?.[1]?.toLowerCase();
  if (scheme === undefined || scheme === 'sqlite') return raw;
  if ((scheme === 'postgres' || scheme === 'postgresql') && raw.startsWith(`${scheme}://`)) return raw;
  throw new ConfigError(`DATABASE_URL must be ${DATABASE_URL_FORMS}; got the unsupported scheme "${scheme}:"`);
}

function redisUrl(env: Env): string | undefined {
  const raw = env.REDIS_URL || undefined;
  if (raw !== undefined && !/^rediss?:\/\//.test(raw)) throw new ConfigError(`REDIS_URL must be redis://host:6379 or rediss://...; got "${maskUrl(raw)}"`);
  return raw;
}

/** The URL with its password replaced, for logs and messages. */
export function maskUrl(raw: string): string {
  try {
    const parsed = new URL(raw);
    if (!parsed.password) return raw;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return raw;
  }
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
function maxConnections(env: Env, dbPoolSize: number): number {
  const limit = openFilesLimit();
  const derived = limit === undefined ? 10_000 : Math.max(16, limit - 64 - dbPoolSize);
  const chosen = integer(env, 'MAX_CONNECTIONS', derived, 16, 1_000_000);
  if (limit !== undefined && chosen > derived) {
    throw new ConfigError(`MAX_CONNECTIONS=${chosen} leaves no file descriptors for the gateway itself (open files limit ${limit}); raise the limit (ulimit -n / LimitNOFILE) or lower MAX_CONNECTIONS to at most ${derived}`);
  }
  return chosen;
}

function url(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  try {
    const parsed = new URL(raw);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  }
  return raw;
}

function bothOrNeither(env: Env, a: string, b: string): boolean {
  if (Boolean(env[a]) !== Boolean(env[b])) throw new ConfigError(`set both ${a} and ${b}, or neither`);
  return Boolean(env[a]);
}

/** Provider credentials and per-provider resilience; PROVIDER_<NAME>_* override the defaults. */
function readProviders(env: Env, catalog: CatalogModel[]): ProvidersConfig {
  const providers: ProvidersConfig = { resilience: {}, connectTimeoutMs: integer(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', 3000, 10, 60_000) };
  if (bothOrNeither(env, 'VOLC_ACCESS_KEY_ID', 'VOLC_SECRET_ACCESS_KEY')) {
    providers.volc = {
      accessKeyId: env.VOLC_ACCESS_KEY_ID as string,
      secretAccessKey: env.VOLC_SECRET_ACCESS_KEY as string,
      endpoint: url(env, 'VOLC_VISUAL_ENDPOINT', 'https://visual.volcengineapi.com'),
      pollIntervalMs: integer(env, 'VOLC_POLL_INTERVAL_MS', 1000, 1, 60_000),
    };
  }
  if (env.ARK_API_KEY) providers.ark = { apiKey: env.ARK_API_KEY, baseUrl: url(env, 'ARK_BASE_URL', 'https://ark.cn-beijing.volces.com/api/v3') };
  if (bothOrNeither(env, 'OPENAI_COMPAT_BASE_URL', 'OPENAI_COMPAT_API_KEY')) {
    const name = env.OPENAI_COMPAT_PROVIDER_NAME || 'openai';
    if (!/^[a-z][a-z0-9_-]{0,31}$/.test(name) || name === 'local' || name === 'jimeng') {
      throw new ConfigError(`OPENAI_COMPAT_PROVIDER_NAME must be a lowercase name other than local and jimeng, got "${name}"`);
    }
    providers.openaiCompatible = { name, baseUrl: url(env, 'OPENAI_COMPAT_BASE_URL', ''), apiKey: env.OPENAI_COMPAT_API_KEY as string };
  }
  const names = ['local', 'jimeng', ...(providers.openaiCompatible ? [providers.openaiCompatible.name] : [])];
  for (const model of catalog) {
    if (!names.includes(model.provider)) {
      throw new ConfigError(`catalog model ${model.model} uses provider "${model.provider}", which is not configured (known: ${names.join(', ')})`);
    }
    if (model.provider === 'jimeng' && model.transport !== 'visual' && model.transport !== 'ark') {
      throw new ConfigError(`catalog model ${model.model}: jimeng models need "transport": "visual" or "ark"`);
    }
  }
  const timeoutMs = integer(env, 'PROVIDER_TIMEOUT_MS', 60_000, 100, 600_000);
  for (const name of names) {
    const prefix = `PROVIDER_${name.toUpperCase().replace(/-/g, '_')}_`;
    providers.resilience[name] = {
      timeoutMs: integer(env, `${prefix}TIMEOUT_MS`, timeoutMs, 100, 600_000),
      maxAttempts: integer(env, `${prefix}MAX_ATTEMPTS`, 3, 1, 10),
      retryBaseDelayMs: integer(env, `${prefix}RETRY_BASE_DELAY_MS`, 500, 1, 60_000),
      maxConcurrent: integer(env, `${prefix}MAX_CONCURRENCY`, 16, 1, 10_000),
      breakerThreshold: integer(env, `${prefix}BREAKER_THRESHOLD`, 5, 1, 1000),
      breakerCooldownMs: integer(env, `${prefix}BREAKER_COOLDOWN_MS`, 30_000, 10, 3_600_000),
    };
  }
  return providers;
}

/** CF_ACCESS_TEAM_DOMAIN + CF_ACCESS_AUD (both or neither), CF_ACCESS_JWKS_URL optional. */
function readAccessJwt(env: Env): AccessJwtConfig | undefined {
  if (!bothOrNeither(env, 'CF_ACCESS_TEAM_DOMAIN', 'CF_ACCESS_AUD')) return undefined;
  const domain = (env.CF_ACCESS_TEAM_DOMAIN as string).trim();
  let issuer: string;
  try {
    // `myteam.cloudflareaccess.com` or `https://myteam.cloudflareaccess.com`: the issuer is the origin.
    issuer = new URL(/^https?:\/\//.test(domain) ? domain : `https://${domain}`).origin;
  } catch {
    throw new ConfigError(`CF_ACCESS_TEAM_DOMAIN must be a host name like myteam.cloudflareaccess.com, got "${domain}"`);
  }
  const audiences = (env.CF_ACCESS_AUD as string).split(',').map((v) => v.trim()).filter(Boolean);
  if (audiences.length === 0) throw new ConfigError('CF_ACCESS_AUD must name at least one application AUD tag');
  return { issuer, audiences, jwksUrl: url(env, 'CF_ACCESS_JWKS_URL', `${issuer}/cdn-cgi/access/certs`) };
}

/**
 * IMAGE_* settings. Outside production a missing IMAGE_URL_SIGNING_KEY is generated once into the
 * data directory (0600), like the admin secret; replicas must share one, so production requires it.
 */
/** Hosts upstream images may come from unless IMAGE_FETCH_ALLOWED_HOSTS says otherwise. */
export const DEFAULT_IMAGE_HOSTS = '*.volces.com,*.byteimg.com';

function readImages(env: Env, nodeEnv: string, databaseUrl: string, announce: (line: string) => void): ImagesConfig {
  const kind = env.IMAGE_STORE || 'directory';
  if (kind !== 'directory' && kind !== 's3') throw new ConfigError(`IMAGE_STORE must be directory or s3, got "${kind}"`);
  let store: ImagesConfig['store'];
  if (kind === 's3') {
    if (!env.IMAGE_S3_BUCKET) throw new ConfigError('IMAGE_STORE=s3 needs IMAGE_S3_BUCKET');
    const endpoint = env.IMAGE_S3_ENDPOINT ? url(env, 'IMAGE_S3_ENDPOINT', '') : undefined;
    store = {
      kind,
      bucket: env.IMAGE_S3_BUCKET,
      prefix: env.IMAGE_S3_PREFIX ?? 'images/',
      region: env.IMAGE_S3_REGION || 'us-east-1',
      endpoint,
      forcePathStyle: boolean(env, 'IMAGE_S3_FORCE_PATH_STYLE', endpoint !== undefined),
      credentials: bothOrNeither(env, 'IMAGE_S3_ACCESS_KEY_ID', 'IMAGE_S3_SECRET_ACCESS_KEY')
        ? { accessKeyId: env.IMAGE_S3_ACCESS_KEY_ID as string, secretAccessKey: env.IMAGE_S3_SECRET_ACCESS_KEY as string }
        : undefined,
    };
  } else {
    store = { kind, directory: path.resolve(env.IMAGE_DIRECTORY || path.join(dataDirectory(databaseUrl), 'images')) };
  }
  let signingKey = env.IMAGE_URL_SIGNING_KEY ?? '';
  if (signingKey !== '' && signingKey.length < 32) throw new ConfigError('IMAGE_URL_SIGNING_KEY must be at least 32 characters');
  if (signingKey === '') {
    if (nodeEnv === 'production') throw new ConfigError('IMAGE_URL_SIGNING_KEY is required when NODE_ENV=production');
    const file = path.join(dataDirectory(databaseUrl), 'image-url-key');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // Written aside, then linked into place (atomic, fails if present): of several processes
    // starting at once, one key wins and every process reads that one.
    const draft = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(draft, `${randomBase62(48)}\n`, { mode: 0o600 });
    try {
      fs.linkSync(draft, file);
      announce(`Generated the image URL signing key (stored in ${file}); set IMAGE_URL_SIGNING_KEY to share one between replicas.`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      fs.rmSync(draft, { force: true });
    }
    signingKey = fs.readFileSync(file, 'utf8').trim();
  }
  const publicBaseUrl = env.PUBLIC_BASE_URL ? url(env, 'PUBLIC_BASE_URL', '').replace(/\/+$/, '') : undefined;
  return {
    store,
    retentionMs: integer(env, 'IMAGE_RETENTION_HOURS', 168, 1, 24 * 3650) * 3_600_000,
    signingKey,
    publicBaseUrl,
    maxBytes: integer(env, 'IMAGE_MAX_BYTES', 20 * 1024 * 1024, 1024, 512 * 1024 * 1024),
    fetchTimeoutMs: integer(env, 'IMAGE_FETCH_TIMEOUT_MS', 30_000, 100, 600_000),
    // Ark serves results from TOS under volces.com; the visual API from p<N>-aiop-sign.byteimg.com.
    allowedHosts: (env.IMAGE_FETCH_ALLOWED_HOSTS ?? DEFAULT_IMAGE_HOSTS).split(',').map((h) => h.trim().toLowerCase()).filter(Boolean),
  };
}

function cidrList(env: Env, name: string): string[] {
  const entries = (env[name] ?? '').split(',').map((v) => v.trim()).filter(Boolean);
  const bad = entries.filter((entry) => parseCidr(entry) === undefined);
  if (bad.length > 0) throw new ConfigError(`${name} must be comma-separated IP addresses or CIDRs, got "${bad.join(', ')}"`);
  return entries;
}

export function loadConfig(env: Env = process.env, announce: (line: string) => void = (l) => console.error(l)): GatewayConfig {
  const nodeEnv = env.NODE_ENV ?? 'development';
  const database = databaseUrlFromEnv(env);
  const logLevel = env.LOG_LEVEL ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "${logLevel}"`);
  }
  const catalog = readCatalog(env);
  const dbPoolSize = integer(env, 'DB_POOL_SIZE', 10, 1, 500);
  return {
    nodeEnv,
    host: env.HOST || '0.0.0.0',
    port: integer(env, 'PORT', 8080, 0, 65535),
    databaseUrl: database,
    adminSecret: resolveAdminSecret(env, nodeEnv, database, announce),
    logLevel,
    validateResponses: boolean(env, 'VALIDATE_RESPONSES', false),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 65_536, 1024, 10_485_760),
    catalog,
    providers: readProviders(env, catalog),
    rateLimitStore: rateLimitStore(env, database),
    redisUrl: redisUrl(env),
    redisPrefix: env.REDIS_PREFIX ?? 'cgw:',
    dbPoolSize,
    dbConnectTimeoutMs: integer(env, 'DB_CONNECT_TIMEOUT_MS', 2000, 100, 60_000),
    dbStatementTimeoutMs: integer(env, 'DB_STATEMENT_TIMEOUT_MS', 5000, 100, 600_000),
    redisConnectTimeoutMs: integer(env, 'REDIS_CONNECT_TIMEOUT_MS', 1000, 100, 60_000),
    redisCommandTimeoutMs: integer(env, 'REDIS_COMMAND_TIMEOUT_MS', 500, 10, 60_000),
    rateLimitRedisFallback: oneOf(env, 'RATE_LIMIT_REDIS_FALLBACK', ['refuse', 'sql'] as const, 'refuse'),
    dependencyStartupTimeoutMs: integer(env, 'DEPENDENCY_STARTUP_TIMEOUT_MS', 30_000, 0, 3_600_000),
    readinessFailureWindowMs: integer(env, 'READINESS_FAILURE_WINDOW_MS', 3000, 0, 600_000),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 30_000, 0, 600_000),
    sweepGraceMs: integer(env, 'SWEEP_GRACE_MS', 30_000, 0, 3_600_000),
    internalPort: integer(env, 'INTERNAL_PORT', 8081, 0, 65535),
    serviceTokens: resolveServiceTokens(env, nodeEnv, database, announce),
    accessJwt: readAccessJwt(env),
    images: readImages(env, nodeEnv, database, announce),
    channels: {
      sealingKeys: resolveSealingKeys(env, nodeEnv, database, announce),
      queueTimeoutMs: integer(env, 'CHANNEL_QUEUE_TIMEOUT_MS', 2000, 0, 60_000),
      queueMaxWaiters: integer(env, 'CHANNEL_QUEUE_MAX_WAITERS', 100, 0, 100_000),
      probeIntervalMs: integer(env, 'CHANNEL_PROBE_INTERVAL_MS', 0, 0, 86_400_000),
      pollIntervalMs: integer(env, 'VOLC_POLL_INTERVAL_MS', 1000, 1, 60_000),
      allowPrivateUpstreams: boolean(env, 'CHANNEL_ALLOW_PRIVATE_UPSTREAMS', false),
    },
    trustedProxies: cidrList(env, 'TRUSTED_PROXIES'),
    keyLeaseTtlMs: integer(env, 'KEY_LEASE_TTL_MS', 30_000, 300, 3_600_000),
    generations: {
      leaseMs: integer(env, 'GENERATION_LEASE_MS', 30_000, 300, 3_600_000),
      pollMs: integer(env, 'GENERATION_POLL_MS', 1000, 10, 600_000),
      workerConcurrency: integer(env, 'GENERATION_WORKER_CONCURRENCY', 16, 1, 10_000),
      maxQueuedPerKey: integer(env, 'MAX_QUEUED_GENERATIONS_PER_KEY', 50, 1, 1_000_000),
    },
    webhooks: {
      allowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
      pollIntervalMs: integer(env, 'WEBHOOK_POLL_INTERVAL_MS', 1000, 10, 600_000),
      leaseMs: integer(env, 'WEBHOOK_LEASE_MS', 60_000, 100, 3_600_000),
      timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 15_000, 100, 60_000),
      disableAfterMs: integer(env, 'WEBHOOK_DISABLE_AFTER_HOURS', 120, 1, 8760) * 3_600_000,
      keyExpiringDays: integer(env, 'WEBHOOK_KEY_EXPIRING_DAYS', 7, 1, 365),
      expiryScanIntervalMs: integer(env, 'WEBHOOK_EXPIRY_SCAN_INTERVAL_MS', 60_000, 10, 86_400_000),
    },
    bodyTimeoutMs: integer(env, 'BODY_TIMEOUT_MS', 10_000, 100, 600_000),
    headersTimeoutMs: integer(env, 'HEADERS_TIMEOUT_MS', 15_000, 100, 600_000),
    maxConnections: maxConnections(env, dbPoolSize),
  };
}

/** The effective configuration for the startup log line: every secret masked, nothing else hidden. */
export function describeConfig(config: GatewayConfig): Record<string, unknown> {
  const masked = '***';
  const { volc, ark, openaiCompatible, resilience } = config.providers;
  return {
    nodeEnv: config.nodeEnv,
    host: config.host,
    port: config.port,
    internalPort: config.internalPort,
    databaseUrl: maskUrl(config.databaseUrl),
    dbPoolSize: config.dbPoolSize,
    redisUrl: config.redisUrl === undefined ? null : maskUrl(config.redisUrl),
    redisPrefix: config.redisPrefix,
    rateLimitStore: config.rateLimitStore,
    adminSecret: masked,
    serviceTokens: config.serviceTokens.map((token) => ({ clientId: token.clientId, clientSecret: masked })),
    logLevel: config.logLevel,
    validateResponses: config.validateResponses,
    bodyLimitBytes: config.bodyLimitBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    headersTimeoutMs: config.headersTimeoutMs,
    maxConnections: config.maxConnections,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    sweepGraceMs: config.sweepGraceMs,
    dbConnectTimeoutMs: config.dbConnectTimeoutMs,
    dbStatementTimeoutMs: config.dbStatementTimeoutMs,
    rateLimitRedisFallback: config.rateLimitRedisFallback,
    accessJwt: config.accessJwt ?? null,
    images: {
      store: config.images.store.kind === 's3' ? { kind: 's3', bucket: config.images.store.bucket, endpoint: config.images.store.endpoint ?? null, credentials: masked } : config.images.store,
      retentionMs: config.images.retentionMs,
      signingKey: masked,
      publicBaseUrl: config.images.publicBaseUrl ?? null,
    },
    channels: { sealingKeys: config.channels.sealingKeys.map(() => masked), queueTimeoutMs: config.channels.queueTimeoutMs, queueMaxWaiters: config.channels.queueMaxWaiters, probeIntervalMs: config.channels.probeIntervalMs, allowPrivateUpstreams: config.channels.allowPrivateUpstreams },
    models: config.catalog.map((entry) => entry.model),
    providers: {
      volc: volc ? { accessKeyId: volc.accessKeyId, secretAccessKey: masked, endpoint: volc.endpoint, pollIntervalMs: volc.pollIntervalMs } : null,
      ark: ark ? { apiKey: masked, baseUrl: ark.baseUrl } : null,
      openaiCompatible: openaiCompatible ? { name: openaiCompatible.name, baseUrl: openaiCompatible.baseUrl, apiKey: masked } : null,
      resilience,
      connectTimeoutMs: config.providers.connectTimeoutMs,
    },
  };
}
