import fs from 'node:fs';
import path from 'node:path';
import { parseCidr } from '../shared/cidr';
import { randomBase62 } from '../shared/ids';
import type { ResilienceSettings } from '../providers/resilience/resilient-provider';
import { DEFAULT_CATALOG, parseCatalog, type CatalogModel } from './catalog';

export interface ProvidersConfig {
  volc?: { accessKeyId: string; secretAccessKey: string; endpoint: string; pollIntervalMs: number };
  ark?: { apiKey: string; baseUrl: string };
  openaiCompatible?: { name: string; baseUrl: string; apiKey: string };
  /** Per provider name: deadline, retries, concurrency, breaker. */
  resilience: Record<string, ResilienceSettings>;
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
  providers: ProvidersConfig;
  /** How long SIGTERM waits for in-flight requests before cutting them. */
  shutdownTimeoutMs: number;
  /** Second listener for the internal creative API. */
  internalPort: number;
  /** Cloudflare-Access-style service tokens accepted on the internal API. */
  serviceTokens: ServiceToken[];
  /** Extra wait beyond the slowest provider deadline before a pending generation counts as abandoned. */
  sweepGraceMs: number;
  /** TRUSTED_PROXIES: CIDRs of proxies whose X-Forwarded-For is believed (key allowed_ips). */
  trustedProxies: string[];
  /** KEY_LEASE_TTL_MS: a dead replica's max_concurrent slots free after this. */
  keyLeaseTtlMs: number;
  webhooks: WebhookSettings;
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
  const providers: ProvidersConfig = { resilience: {} };
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

function cidrList(env: Env, name: string): string[] {
  const entries = (env[name] ?? '').split(',').map((v) => v.trim()).filter(Boolean);
  const bad = entries.filter((entry) => parseCidr(entry) === undefined);
  if (bad.length > 0) throw new ConfigError(`${name} must be comma-separated IP addresses or CIDRs, got "${bad.join(', ')}"`);
  return entries;
}

export function loadConfig(env: Env = process.env, announce: (line: string) => void = (l) => console.error(l)): GatewayConfig {
  const nodeEnv = env.NODE_ENV ?? 'development';
  const databaseUrl = env.DATABASE_URL || './data/gateway.db';
  const logLevel = env.LOG_LEVEL ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "${logLevel}"`);
  }
  const catalog = readCatalog(env);
  return {
    nodeEnv,
    host: env.HOST || '0.0.0.0',
    port: integer(env, 'PORT', 8080, 0, 65535),
    databaseUrl,
    adminSecret: resolveAdminSecret(env, nodeEnv, databaseUrl, announce),
    logLevel,
    validateResponses: boolean(env, 'VALIDATE_RESPONSES', false),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 65_536, 1024, 10_485_760),
    catalog,
    providers: readProviders(env, catalog),
    rateLimitStore: rateLimitStore(env, databaseUrl),
    redisUrl: env.REDIS_URL || undefined,
    redisPrefix: env.REDIS_PREFIX ?? 'cgw:',
    dbPoolSize: integer(env, 'DB_POOL_SIZE', 10, 1, 500),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 30_000, 0, 600_000),
    sweepGraceMs: integer(env, 'SWEEP_GRACE_MS', 30_000, 0, 3_600_000),
    internalPort: integer(env, 'INTERNAL_PORT', 8081, 0, 65535),
    serviceTokens: resolveServiceTokens(env, nodeEnv, databaseUrl, announce),
    trustedProxies: cidrList(env, 'TRUSTED_PROXIES'),
    keyLeaseTtlMs: integer(env, 'KEY_LEASE_TTL_MS', 30_000, 300, 3_600_000),
    webhooks: {
      allowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
      pollIntervalMs: integer(env, 'WEBHOOK_POLL_INTERVAL_MS', 1000, 10, 600_000),
      leaseMs: integer(env, 'WEBHOOK_LEASE_MS', 60_000, 100, 3_600_000),
      timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 15_000, 100, 60_000),
      disableAfterMs: integer(env, 'WEBHOOK_DISABLE_AFTER_HOURS', 120, 1, 8760) * 3_600_000,
      keyExpiringDays: integer(env, 'WEBHOOK_KEY_EXPIRING_DAYS', 7, 1, 365),
      expiryScanIntervalMs: integer(env, 'WEBHOOK_EXPIRY_SCAN_INTERVAL_MS', 60_000, 10, 86_400_000),
    },
  };
}
