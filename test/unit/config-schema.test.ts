import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describeConfig, loadConfig } from '../../src/config/config';
import { accountSchema, envSchema, namedVariables, providerSchema, readEnv } from '../../src/config/env-schema';
import { envMeta } from '../../src/config/env-types';
import { BUILT_IN_PROVIDERS } from '../../src/providers/formats';

const quiet = () => undefined;
const database = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-config-schema-')), 'gw.db');
const given = () => ({ DATABASE_URL: database(), ADMIN_SECRET: 'a-long-enough-secret' });

describe('configuration schema', () => {
  it('every variable has a one-line description', () => {
    for (const [name, type] of [...Object.entries(namedVariables), ...Object.entries(providerSchema.shape)]) {
      const description = envMeta.get(type)?.description;
      expect({ name, description: typeof description === 'string' && description.length > 0 && !description.includes('\n') }).toEqual({
        name,
        description: true,
      });
    }
  });

  it('defaults', () => {
    const config = loadConfig(given(), quiet);
    expect(config).toMatchObject({
      nodeEnv: 'development',
      host: '0.0.0.0',
      port: 8080,
      internalPort: 8081,
      logLevel: 'info',
      validateResponses: false,
      bodyLimitBytes: 65_536,
      bodyTimeoutMs: 10_000,
      headersTimeoutMs: 15_000,
      shutdownTimeoutMs: 30_000,
      sweepGraceMs: 30_000,
      keyLeaseTtlMs: 30_000,
      trustedProxies: [],
      rateLimitStore: 'memory',
      rateLimitRedisFallback: 'refuse',
      redisPrefix: 'cgw:',
      dbPoolSize: 10,
      dbConnectTimeoutMs: 2000,
      dbStatementTimeoutMs: 5000,
      redisConnectTimeoutMs: 1000,
      redisCommandTimeoutMs: 500,
      dependencyStartupTimeoutMs: 30_000,
      readinessFailureWindowMs: 3000,
      accessJwt: undefined,
      images: { retentionMs: 168 * 3_600_000, publicBaseUrl: undefined, maxBytes: 20 * 1024 * 1024, fetchTimeoutMs: 30_000, allowedHosts: [] },
      channels: { queueTimeoutMs: 2000, queueMaxWaiters: 100, probeIntervalMs: 0, pollIntervalMs: 1000, allowPrivateUpstreams: false },
      generations: { leaseMs: 30_000, pollMs: 1000, workerConcurrency: 16, maxQueuedPerKey: 50 },
      webhooks: {
        allowPrivateNetworks: false,
        pollIntervalMs: 1000,
        leaseMs: 60_000,
        timeoutMs: 15_000,
        disableAfterMs: 120 * 3_600_000,
        keyExpiringDays: 7,
        expiryScanIntervalMs: 60_000,
      },
    });
    // Each provider's documented result hosts are its own (create-images.ts), not a default every provider shares.
    expect(config.images.allowedHosts).toEqual([]);
    expect(config.providers.imageHosts).toEqual(Object.fromEntries(BUILT_IN_PROVIDERS.map((name) => [name, []])));
    expect(
      loadConfig({ ...given(), PROVIDER_BFL_IMAGE_HOSTS: 'BFLDELIVERYPRODEU4.blob.core.windows.net, *.cdn.example' }, quiet).providers.imageHosts.bfl,
    ).toEqual(['bfldeliveryprodeu4.blob.core.windows.net', '*.cdn.example']);
    expect(config.providers.connectTimeoutMs).toBe(3000);
    // The same defaults for every built-in provider (formats.ts BUILT_IN_PROVIDERS).
    const defaults = { timeoutMs: 60_000, maxAttempts: 3, retryBaseDelayMs: 500, maxConcurrent: 16, breakerThreshold: 5, breakerCooldownMs: 30_000 };
    expect(config.providers.resilience).toEqual(Object.fromEntries(BUILT_IN_PROVIDERS.map((name) => [name, defaults])));
    expect(Object.keys(config.providers.resilience)).toEqual(expect.arrayContaining(['local', 'jimeng']));
    // A provider with no guard of its own (a channel's provider no longer configured) gets the same.
    expect(config.providers.defaultResilience).toEqual(defaults);
    expect(loadConfig({ ...given(), PROVIDER_TIMEOUT_MS: '5000', PROVIDER_JIMENG_TIMEOUT_MS: '7000' }, quiet).providers).toMatchObject({
      defaultResilience: { timeoutMs: 5000 },
      resilience: { local: { timeoutMs: 5000 }, jimeng: { timeoutMs: 7000 } },
    });
    expect(config.maxConnections).toBeGreaterThanOrEqual(16);
    expect(config.providers.localMode).toBe('render');
    expect(loadConfig({ ...given(), LOCAL_PROVIDER_MODE: 'tiny' }, quiet).providers.localMode).toBe('tiny');
  });

  it('empty means unset, except where an empty value means something', () => {
    const config = loadConfig({ ...given(), PORT: '', REDIS_PREFIX: '', IMAGE_FETCH_ALLOWED_HOSTS: '' }, quiet);
    expect(config).toMatchObject({ port: 8080, redisPrefix: '', images: { allowedHosts: [] } });
  });

  it.each([
    ['PORT', 0, 65535],
    ['INTERNAL_PORT', 0, 65535],
    ['BODY_LIMIT_BYTES', 1024, 10_485_760],
    ['DB_POOL_SIZE', 1, 500],
    ['DB_STATEMENT_TIMEOUT_MS', 100, 600_000],
    ['REDIS_COMMAND_TIMEOUT_MS', 10, 60_000],
    ['KEY_LEASE_TTL_MS', 300, 3_600_000],
    ['IMAGE_RETENTION_HOURS', 1, 24 * 3650],
    ['CHANNEL_QUEUE_MAX_WAITERS', 0, 100_000],
    ['WEBHOOK_KEY_EXPIRING_DAYS', 1, 365],
    ['PROVIDER_LOCAL_MAX_ATTEMPTS', 1, 10],
    ['PROVIDER_JIMENG_TIMEOUT_MS', 100, 600_000],
  ])('%s: %d to %d, a value outside refused naming the variable', (name, min, max) => {
    const message = new RegExp(`^${name} must be an integer from ${min} to ${max}, got "`);
    for (const value of [min, max]) expect(() => loadConfig({ ...given(), [name]: String(value) }, quiet)).not.toThrow();
    for (const value of [min - 1, max + 1, 1.5]) expect(() => loadConfig({ ...given(), [name]: String(value) }, quiet)).toThrow(message);
  });

  it('every refused value is named by its variable, several at once', () => {
    for (const [name, schema] of [
      ...Object.keys(envSchema.shape).map((key) => [key, envSchema] as const),
      ...Object.keys(accountSchema.shape).map((key) => [key, accountSchema] as const),
    ]) {
      try {
        readEnv(schema, { [name]: '%not valid%' });
      } catch (error) {
        expect((error as Error).message).toMatch(new RegExp(`^${name} `));
      }
    }
    expect(() => loadConfig({ ...given(), PORT: 'x', LOG_LEVEL: 'loud' }, quiet)).toThrow(/^PORT must be .*; LOG_LEVEL must be one of/);
  });
});

describe('describeConfig', () => {
  const secrets = {
    ADMIN_SECRET: 'admin-secret-must-not-leak',
    CF_ACCESS_CLIENT_SECRET: 'service-secret-must-not-leak',
    VOLC_SECRET_ACCESS_KEY: 'volc-secret-must-not-leak',
    ARK_API_KEY: 'ark-key-must-not-leak',
    OPENAI_COMPAT_API_KEY: 'openai-key-must-not-leak',
    IMAGE_URL_SIGNING_KEY: 'image-signing-key-must-not-leak-0123456789',
    IMAGE_S3_SECRET_ACCESS_KEY: 's3-secret-must-not-leak',
    CHANNEL_SEALING_KEY: 'ab'.repeat(32),
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=otel-token-must-not-leak',
    CONSOLE_OIDC_ISSUERS: JSON.stringify([
      { id: 'corp', issuer: 'https://login.example.com', client_id: 'gateway-visible', client_secret: 'oidc-secret-must-not-leak', scope_map: {} },
    ]),
  };
  const configured = () =>
    loadConfig(
      {
        ...given(),
        ...secrets,
        REDIS_URL: 'redis://:redis-password-must-not-leak@127.0.0.1:6379/0',
        CF_ACCESS_CLIENT_ID: 'svc-visible',
        VOLC_ACCESS_KEY_ID: 'AKLTvisible',
        OPENAI_COMPAT_BASE_URL: 'https://images.example.com/v1',
        IMAGE_STORE: 's3',
        IMAGE_S3_BUCKET: 'bucket',
        IMAGE_S3_ACCESS_KEY_ID: 's3-id-visible',
      },
      quiet,
    );

  it('masks every variable the schema declares secret, and nothing else', () => {
    const described = describeConfig(configured());
    const line = JSON.stringify(described);
    for (const secret of [...Object.values(secrets), 'redis-password-must-not-leak', 'oidc-secret-must-not-leak']) expect(line).not.toContain(secret);
    expect(described).toMatchObject({ consoleSso: { issuers: [{ clientId: 'gateway-visible', clientSecret: '***' }] } });
    expect(described).toMatchObject({
      adminSecret: '***',
      redisUrl: 'redis://:***@127.0.0.1:6379/0',
      serviceTokens: [{ clientId: 'svc-visible', clientSecret: '***' }],
      images: { signingKey: '***', store: { bucket: 'bucket', credentials: { accessKeyId: 's3-id-visible', secretAccessKey: '***' } } },
      channels: { sealingKeys: ['***'] },
      providers: {
        accounts: [
          { format: 'visual', provider: 'jimeng', channelId: 'chn_envJimengVisual', credentials: { access_key_id: 'AKLTvisible', secret_access_key: '***' } },
          { format: 'ark', provider: 'jimeng', channelId: 'chn_envJimengArk', credentials: { api_key: '***' } },
          { format: 'images-api', provider: 'openai-compatible', channelId: 'chn_envOpenaiCompatible', credentials: { api_key: '***' } },
        ],
      },
      port: 8080,
      accessJwt: null,
    });
  });

  it('every secret variable names the field it lands in', () => {
    const config = configured() as unknown as Record<string, unknown>;
    const at = (value: unknown, steps: string[]): unknown => {
      const [step, ...rest] = steps;
      if (step === undefined) return value;
      if (step === '*') return Array.isArray(value) ? value.map((item: unknown) => at(item, rest)).find((found) => found !== undefined) : undefined;
      return value !== null && typeof value === 'object' ? at((value as Record<string, unknown>)[step], rest) : undefined;
    };
    for (const [name, type] of Object.entries(namedVariables)) {
      const meta = envMeta.get(type);
      if (!meta?.secret) continue;
      expect({ name, field: meta.field !== undefined && at(config, meta.field.split('.')) !== undefined }).toEqual({ name, field: true });
    }
  });
});
