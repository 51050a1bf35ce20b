import { z } from 'zod';
import {
  boolean,
  cidrList,
  databaseUrl,
  decimal,
  envMeta,
  httpUrl,
  integer,
  list,
  minLength,
  oneOf,
  redisUrl,
  sealingKeys,
  text,
  declareVariable,
} from './env-types';
import { FORMATS } from '../providers/formats';
import { ConfigError } from './config-error';

const declare = declareVariable;

const GENERATED = 'generated outside production';

/**
 * Every environment variable the gateway reads, one declaration each. configSchema (gateway-config.ts) turns the parsed
 * values into GatewayConfig, with the cross-variable checks and defaults that depend on others.
 */
export const envSchema = z.object({
  NODE_ENV: declare(text.default('development'), { description: '`production` refuses to start without `ADMIN_SECRET`', keepEmpty: true }),
  HOST: declare(text.default('0.0.0.0'), { description: 'listen address' }),
  PORT: declare(integer(0, 65535).default(8080), { description: 'HTTP port' }),
  INTERNAL_PORT: declare(integer(0, 65535).default(8081), { description: 'port of the internal creative API' }),
  DATABASE_URL: declare(databaseUrl.default('./data/gateway.db'), {
    description: 'a SQLite file path or `sqlite:<path>` (WAL mode), or `postgres://` / `postgresql://...`; any other scheme stops startup (exit 78)',
    secret: 'password',
    field: 'databaseUrl',
  }),
  ADMIN_SECRET: declare(minLength(16).optional(), {
    description: 'admin bearer secret (at least 16 characters); required when `NODE_ENV=production`',
    secret: true,
    field: 'adminSecret',
    defaultText: GENERATED,
  }),
  LOG_LEVEL: declare(oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'), {
    description: 'pino level (`silent` to mute)',
    keepEmpty: true,
  }),
  LOG_REQUESTS: declare(boolean.default(true), {
    description:
      'one `info` line per request (id, method, path, status, ms, key); `false` drops it, about 3% of the CPU of a generation on the hot path (BENCHMARKS.md); errors and warnings are logged either way',
  }),
  VALIDATE_RESPONSES: declare(boolean.default(false), { description: 'check every response against the spec (on in tests)' }),
  MODEL_CATALOG: declare(text.optional(), {
    description:
      'an object `{"models": [...], "remove": [...]}` that changes the built-in catalog, or a JSON array of `{model, provider, upstream_model, credits_per_image, default_size}` that replaces it; `npx creative-gateway catalog` prints the result',
    defaultText: 'built in',
  }),
  MODEL_CATALOG_FILE: declare(text.optional(), {
    description: 'a file holding the `MODEL_CATALOG` JSON (when `MODEL_CATALOG` is unset)',
    defaultText: 'built in',
  }),
  CREDITS_PER_USD: declare(decimal(0.001, 1_000_000).default(100), {
    description:
      'credits per US dollar of a model priced in money (every built-in model but `local-1` and the Jimeng ones): 100 makes a credit one cent ([pricing](pricing.md))',
  }),
  PRICE_MARKUP: declare(decimal(0.01, 1000).default(1), {
    description: "factor on every money price (1.2 adds 20%); a catalog model's own `markup` replaces it ([pricing](pricing.md))",
  }),
  LOCAL_PROVIDER_MODE: declare(text.default('render'), { description: '`tiny` makes the local provider answer a fixed 1x1 PNG (benchmarks)' }),
  BODY_LIMIT_BYTES: declare(integer(1024, 10_485_760).default(65_536), {
    description:
      'largest request body (413 past it; a larger `Content-Length` is refused before the body is read); the generation operations (`POST /images/generate`, `POST /v1/images/generations`, `POST /v1/images/edits`, the internal generation) take up to 72 MiB, so a long prompt is refused as a prompt (400), not as a body',
  }),
  BODY_TIMEOUT_MS: declare(integer(100, 600_000).default(10_000), {
    description: 'a request body must have fully arrived this long after its headers, else 408 `request_timeout` and the connection is closed',
  }),
  HEADERS_TIMEOUT_MS: declare(integer(100, 600_000).default(15_000), {
    description:
      "a request's headers must have fully arrived this long after it began, else the connection is closed (checked every tenth of it, at least every second)",
  }),
  IDLE_COMPACTION_MIN_FREE_MB: declare(integer(0, 65_536).default(32), {
    description:
      'after 5 s with no request, one full garbage collection gives the heap back when at least this many MB of it are free (0: whenever the process goes idle after traffic)',
  }),
  MAX_CONNECTIONS: declare(integer(16, 1_000_000).optional(), {
    description: 'open client connections, both listeners together (see Connections)',
    defaultText: 'open-files limit − 64 − `DB_POOL_SIZE`',
  }),
  SHED_EVENT_LOOP_DELAY_MS: declare(integer(0, 60_000).default(1000), {
    description:
      'while the event loop ran this much late in the last half second, generation requests are refused at once with 503 `overloaded` (nothing read, counted or reserved) instead of queuing towards their deadlines; `0` turns it off',
  }),
  SHED_DATABASE_WAIT_MS: declare(integer(0, 60_000).default(100), {
    description:
      'while every piece of work in the last half second waited at least this long for the database (the SQLite group-commit queue, a PostgreSQL pool connection), generation requests are refused at once with 503 `overloaded`: the gateway takes in more than it can serve, and what it admits would wait towards its database deadline; `0` turns it off',
  }),
  ADMISSION_DATABASE_WAIT_MS: declare(integer(0, 60_000).default(1000), {
    description:
      "the longest a generation's reservation waits for the database (its turn in the SQLite group commit, a PostgreSQL pool connection) while the database is busy with work admitted before it; past it the request is refused with 503 `overloaded` and `Retry-After`, nothing reserved. A database that answers nobody is an outage, not a wait: that request fails at its deadline (`DB_STATEMENT_TIMEOUT_MS`) with `dependency_unavailable`. `0`: no bound but the deadline",
  }),
  SHUTDOWN_TIMEOUT_MS: declare(integer(0, 600_000).default(30_000), {
    description: 'on SIGTERM: stop accepting, finish in-flight requests up to this long, then close',
  }),
  TRUSTED_PROXIES: declare(cidrList.default([]), {
    description:
      'comma-separated CIDRs of proxies whose `X-Forwarded-For` is believed (key `allowed_ips`), and whose `X-Forwarded-Proto` / `X-Forwarded-Host` set the server of the served OpenAPI documents',
    defaultText: 'none',
  }),
  KEY_LEASE_TTL_MS: declare(integer(300, 3_600_000).default(30_000), { description: 'a `max_concurrent` slot held by a process that died frees after this' }),
  IDEMPOTENCY_LEASE_MS: declare(integer(300, 3_600_000).default(30_000), {
    description:
      "an `Idempotency-Key`'s claim while its request runs, renewed every third of it: a claim nobody renews (its process died, or its removal after a database outage failed) is taken over by a retry after this",
  }),
  SWEEP_GRACE_MS: declare(integer(0, 3_600_000).default(30_000), {
    description: "a generation pending longer than its provider's deadline plus this was abandoned by a dead process: its credits are released",
  }),
  PROMPT_RETENTION: declare(oneOf(['full', 'hash', 'none']).default('full'), {
    description:
      'what a settled generation keeps of its prompt: `full` (until its row goes), `hash` (only its SHA-256) or `none`; applied by the sweeper, also to rows settled before it was tightened. A project may set its own (its `prompt_retention`), which then applies to the generations of its keys instead. A running generation keeps its prompt while it runs. Under `hash` and `none` the input images (and masks) of each request are deleted with the prompt (their rows keep the SHA-256)',
  }),
  GENERATION_RETENTION_DAYS: declare(integer(0, 36_500).default(400), {
    description:
      "settled generation rows (and their attempt rows) older than this many days are deleted by the sweeper; `0` keeps them forever. Usage analytics (`GET /admin/usage`) read hourly rollups, which are kept; `GET /generations` and the internal API's generation lists and `getUsage` see only rows still kept",
  }),

  // Storage, Redis and the waits on them.
  DB_POOL_SIZE: declare(integer(1, 500).default(10), { description: 'PostgreSQL connections per replica' }),
  DB_CONNECT_TIMEOUT_MS: declare(integer(100, 60_000).default(2000), {
    description: 'PostgreSQL: longest wait for a connection (pool full counts too); then 503',
  }),
  DB_STATEMENT_TIMEOUT_MS: declare(integer(100, 600_000).default(5000), {
    description:
      'PostgreSQL: `statement_timeout`; the client gives up on the whole operation (its wait for a connection or a batch lane, and every statement of a transaction together) 1 s later',
  }),
  REDIS_URL: declare(redisUrl.optional(), {
    description: 'moves rate limiting to Redis (one Lua script per check)',
    secret: 'password',
    field: 'redisUrl',
    defaultText: 'none',
  }),
  REDIS_PREFIX: declare(text.default('cgw:'), { description: 'prefix of every Redis key, so several gateways can share one Redis', keepEmpty: true }),
  REDIS_CONNECT_TIMEOUT_MS: declare(integer(100, 60_000).default(1000), {
    description: 'longest wait for a Redis (re)connection; reconnection is retried every ≤ 1 s in the background',
  }),
  REDIS_COMMAND_TIMEOUT_MS: declare(integer(10, 60_000).default(500), { description: 'longest wait for one Redis answer (a hung Redis); then 503' }),
  RATE_LIMIT_STORE: declare(oneOf(['memory', 'sql', 'redis']).optional(), {
    description: 'where the per-key windows live',
    defaultText: '`redis` with `REDIS_URL`, `sql` on PostgreSQL, else `memory`',
  }),
  RATE_LIMIT_REDIS_FALLBACK: declare(oneOf(['refuse', 'sql']).default('refuse'), {
    description: 'while Redis fails: `refuse` answers 503 `dependency_unavailable`; `sql` counts requests in the SQL limiter instead',
  }),
  DEPENDENCY_STARTUP_TIMEOUT_MS: declare(integer(0, 3_600_000).default(30_000), {
    description: 'at startup, retry an unreachable PostgreSQL or Redis (backoff 0.25 s doubling to 5 s) this long, then exit 78',
  }),
  READINESS_FAILURE_WINDOW_MS: declare(integer(0, 600_000).default(3000), {
    description: 'after a request failed on a dependency, the readiness endpoint (readyz) answers 503 this long, then probes again',
  }),

  // The internal API's callers.
  CF_ACCESS_CLIENT_ID: declare(list.default([]), {
    description: 'service token client ids for the internal API, comma-separated for several; required in production',
    defaultText: GENERATED,
  }),
  CF_ACCESS_CLIENT_SECRET: declare(list.default([]), {
    description: "the service tokens' secrets, in the order of `CF_ACCESS_CLIENT_ID` (each at least 16 characters); required in production",
    secret: true,
    field: 'serviceTokens.*.clientSecret',
    defaultText: GENERATED,
  }),
  CF_ACCESS_TEAM_DOMAIN: declare(text.optional(), {
    description: 'accept Cloudflare Access JWTs on the internal API: `<team>.cloudflareaccess.com` (with `CF_ACCESS_AUD`)',
    defaultText: 'none',
  }),
  CF_ACCESS_AUD: declare(text.optional(), {
    description: "the Access application's AUD tag(s), comma-separated (with `CF_ACCESS_TEAM_DOMAIN`)",
    defaultText: 'none',
  }),
  CF_ACCESS_JWKS_URL: declare(httpUrl.optional(), {
    description: "where the team's signing keys are fetched",
    defaultText: '`https://<team>.cloudflareaccess.com/cdn-cgi/access/certs`',
  }),
  CF_ACCESS_ADMIN_SCOPES: declare(list.default([]), {
    description:
      'admin scopes (comma-separated `AdminScope` values) a person with a valid Access JWT holds on the admin API, e.g. the console behind Access; empty: Access JWTs are no admin credential',
    defaultText: 'none',
  }),
  CF_ACCESS_ADMIN_AUD: declare(text.optional(), {
    description: 'the AUD tag(s) of the Access application in front of the admin API and console, comma-separated',
    defaultText: '`CF_ACCESS_AUD`',
  }),
  CONSOLE_OIDC_ISSUERS: declare(text.optional(), {
    description:
      'console single sign-on: a JSON array of OpenID Connect issuers, each `{id, name, issuer, client_id, client_secret?, scopes?, groups_claim?, scope_map}` ([security](security.md#single-sign-on)); discovery runs at startup and its failure, or an unknown scope in `scope_map`, stops it',
    secret: true,
    field: 'consoleSso.issuers.*.clientSecret',
    defaultText: 'none (token sign-in only)',
  }),
  CONSOLE_SESSION_IDLE_MINUTES: declare(integer(1, 1440).default(60), {
    description: 'a console single sign-on session unused this long ends (the person signs in again)',
  }),
  CONSOLE_SESSION_MAX_HOURS: declare(integer(1, 720).default(12), {
    description: 'a console single sign-on session ends this long after its sign-in, however much it is used',
  }),

  // Providers configured from the environment.
  PROVIDER_TIMEOUT_MS: declare(integer(100, 600_000).default(60_000), { description: 'default deadline of one generation at a provider (see Providers)' }),
  UPSTREAM_CONNECT_TIMEOUT_MS: declare(integer(10, 60_000).default(3000), {
    description: 'deadline of the TCP connect to an upstream; past it the call never reached the upstream and goes to another channel',
  }),
  UPSTREAM_KEEP_ALIVE_MS: declare(integer(100, 600_000).default(10_000), {
    description:
      'how long an idle upstream connection is kept for the next call (at most; sooner when the upstream closes it); the connections a burst of slow generations opened close this long after it',
  }),
  UPSTREAM_POLL_INTERVAL_MS: declare(integer(1, 60_000).optional(), {
    description: 'how often an accepted upstream task is polled (every task-based format, environment accounts and API channels)',
    defaultText: '`VOLC_POLL_INTERVAL_MS`, else 1000',
  }),
  VOLC_POLL_INTERVAL_MS: declare(integer(1, 60_000).optional(), {
    description: 'the same as `UPSTREAM_POLL_INTERVAL_MS`, read when that is unset',
    defaultText: 'none',
  }),

  // Image storage.
  IMAGE_STORE: declare(oneOf(['directory', 's3'], 'directory or s3,').default('directory'), { description: '`directory` or `s3`' }),
  IMAGE_DIRECTORY: declare(text.optional(), {
    description: "where the `directory` store keeps files (fanned out by the id's last two characters; written to a temporary file, fsynced, renamed)",
    defaultText: '`./data/images` (the `images/` folder beside the SQLite file)',
  }),
  IMAGE_RETENTION_HOURS: declare(integer(1, 24 * 3650).default(168), { description: 'how long an image and its URLs live' }),
  IMAGE_URL_SIGNING_KEY: declare(minLength(32).optional(), {
    description:
      'HMAC key of image URLs, at least 32 characters; required when `NODE_ENV=production`; the same on every replica; changing it invalidates every URL handed out',
    secret: true,
    field: 'images.signingKey',
    defaultText: 'generated outside production into `./data/image-url-key`',
  }),
  PUBLIC_BASE_URL: declare(httpUrl.optional(), {
    description: 'scheme, host and port clients reach the gateway at, for the URLs (set it behind a proxy or load balancer)',
    defaultText: '`http://<HOST or localhost>:<PORT>`',
  }),
  IMAGE_MAX_BYTES: declare(integer(1024, 512 * 1024 * 1024).default(20 * 1024 * 1024), { description: 'largest image taken from an upstream' }),
  IMAGE_FETCH_TIMEOUT_MS: declare(integer(100, 600_000).default(30_000), { description: 'deadline of one image download (it also ends with the request)' }),
  IMAGE_STORE_TIMEOUT_MS: declare(integer(100, 600_000).default(10_000), {
    description:
      'deadline of one image store operation (a put with its retries, the start of a read, a delete); past it the operation is aborted and a URL generation answers 503 `image_storage_unavailable`, nothing charged',
  }),
  IMAGE_FETCH_ALLOWED_HOSTS: declare(text.default(''), {
    description:
      "comma-separated hosts or `*.domain` (https only) every provider's image URLs may point at besides its own documented result hosts and its base URL's host (`PROVIDER_<NAME>_IMAGE_HOSTS`: one provider's)",
    keepEmpty: true,
  }),
  IMAGE_S3_BUCKET: declare(text.optional(), {
    description: 'the bucket (create it first; the gateway puts, gets and deletes objects)',
    defaultText: 'required with `IMAGE_STORE=s3`',
  }),
  IMAGE_S3_PREFIX: declare(text.default('images/'), { description: 'object keys are `<prefix><image id>`', keepEmpty: true }),
  IMAGE_S3_REGION: declare(text.default('us-east-1'), { description: 'region' }),
  IMAGE_S3_ENDPOINT: declare(httpUrl.optional(), { description: 'e.g. `http://minio:9000` for an S3-compatible server', defaultText: 'AWS' }),
  IMAGE_S3_FORCE_PATH_STYLE: declare(boolean.optional(), {
    description: '`endpoint/bucket/key` URLs, which most S3-compatible servers need',
    defaultText: '`true` with an endpoint, else `false`',
  }),
  IMAGE_S3_ACCESS_KEY_ID: declare(text.optional(), {
    description: 'S3 access key id, with `IMAGE_S3_SECRET_ACCESS_KEY`',
    defaultText: "the AWS SDK's default chain (environment, profile, instance role)",
  }),
  IMAGE_S3_SECRET_ACCESS_KEY: declare(text.optional(), {
    description: 'S3 secret access key, with `IMAGE_S3_ACCESS_KEY_ID`',
    secret: true,
    field: 'images.store.credentials.secretAccessKey',
    defaultText: "the AWS SDK's default chain (environment, profile, instance role)",
  }),

  // Channels.
  CHANNEL_SEALING_KEY: declare(sealingKeys.default([]), {
    description:
      'AES-256-GCM keys sealing channel credentials and webhook signing secrets and keying the HMAC of page cursors, newest first, comma-separated; required in production',
    secret: true,
    field: 'channels.sealingKeys.*',
    defaultText: GENERATED,
  }),
  CHANNEL_QUEUE_TIMEOUT_MS: declare(integer(0, 60_000).default(2000), {
    description: 'how long a request waits when every channel of its model is at a limit, before 503 `provider_busy`',
  }),
  CHANNEL_QUEUE_MAX_WAITERS: declare(integer(0, 100_000).default(100), {
    description: 'calls of one model that may wait so on one replica; past them, 503 `provider_busy` with `Retry-After` at once (0: no waiting)',
  }),
  CHANNEL_PROBE_INTERVAL_MS: declare(integer(0, 86_400_000).default(0), {
    description: 'period of the test that re-enables auto-disabled channels that pass (one replica at a time, once a period across all)',
    defaultText: '`0` (off)',
  }),
  CHANNEL_ALLOW_PRIVATE_UPSTREAMS: declare(boolean.default(false), {
    description:
      "let API channels' `base_url` point at loopback/private addresses (self-hosted upstreams on a private network, development, tests); link-local and cloud metadata addresses stay refused, and `testChannel` does not relay a private upstream's answer",
  }),

  // Durable generations.
  GENERATION_LEASE_MS: declare(integer(300, 3_600_000).default(30_000), {
    description: "a worker's claim on a running generation; renewed every third of it; a lease not renewed (dead process) is taken over by another worker",
  }),
  GENERATION_POLL_MS: declare(integer(10, 600_000).default(1000), {
    description: "how often each process's worker looks for queued work (submitted elsewhere) and lapsed leases; local submissions wake it at once",
  }),
  GENERATION_WORKER_CONCURRENCY: declare(integer(1, 10_000).default(16), {
    description: 'background (asynchronous or taken-over) generations one process runs at once',
  }),
  MAX_QUEUED_GENERATIONS_PER_KEY: declare(integer(1, 1_000_000).default(50), {
    description: 'asynchronous generations one key may have `queued`; beyond, 429 `too_many_queued_generations`',
  }),

  // Webhooks.
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: declare(boolean.default(false), {
    description: 'let webhook endpoints point at loopback/private addresses (development, tests); link-local and cloud metadata addresses stay refused',
  }),
  WEBHOOK_POLL_INTERVAL_MS: declare(integer(10, 600_000).default(1000), { description: 'how often each process looks for due deliveries' }),
  WEBHOOK_LEASE_MS: declare(integer(100, 3_600_000).default(60_000), {
    description: 'how long a claimed delivery is held; keep it above `WEBHOOK_TIMEOUT_MS`, or a slow delivery is sent twice',
  }),
  WEBHOOK_TIMEOUT_MS: declare(integer(100, 60_000).default(15_000), { description: 'deadline of one delivery attempt' }),
  WEBHOOK_DISABLE_AFTER_HOURS: declare(integer(1, 8760).default(120), { description: 'an endpoint whose every attempt failed for this long is disabled' }),
  WEBHOOK_KEY_EXPIRING_DAYS: declare(integer(1, 365).default(7), { description: '`key.expiring` this many days before a key expires' }),
  WEBHOOK_EXPIRY_SCAN_INTERVAL_MS: declare(integer(10, 86_400_000).default(60_000), {
    description: 'how often each process looks for expiring and expired keys',
  }),

  // Traces (OpenTelemetry's own variable names; docs/operators/production.md, "Traces").
  OTEL_SDK_DISABLED: declare(boolean.default(false), { description: '`true` turns traces off whatever the endpoint variables say' }),
  OTEL_EXPORTER_OTLP_ENDPOINT: declare(httpUrl.optional(), {
    description: 'turns traces on: the OTLP/HTTP base URL of a collector (spans go to `<it>/v1/traces`); unset, no tracing code is loaded',
    defaultText: 'off',
  }),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: declare(httpUrl.optional(), {
    description: 'the full URL spans are posted to (turns traces on too); wins over `OTEL_EXPORTER_OTLP_ENDPOINT`',
    defaultText: 'off',
  }),
  OTEL_EXPORTER_OTLP_HEADERS: declare(text.optional(), {
    description: 'headers sent with every export, `name=value` pairs separated by commas (URL-encoded values), e.g. a vendor API key',
    secret: true,
    field: 'telemetry.headers',
  }),
  OTEL_EXPORTER_OTLP_PROTOCOL: declare(oneOf(['http/json']).optional(), {
    description: 'spans are exported as OTLP/HTTP JSON, which every collector takes on its HTTP port (4318); any other value stops startup',
    defaultText: '`http/json`',
  }),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: declare(oneOf(['http/json']).optional(), {
    description: 'as `OTEL_EXPORTER_OTLP_PROTOCOL`, for traces',
    defaultText: '`http/json`',
  }),
  OTEL_SERVICE_NAME: declare(text.default('creative-gateway'), { description: 'the `service.name` of every span' }),
  OTEL_RESOURCE_ATTRIBUTES: declare(text.optional(), {
    description: 'more resource attributes, `key=value` pairs separated by commas (e.g. `deployment.environment.name=prod`)',
  }),
  OTEL_TRACES_SAMPLER: declare(
    oneOf(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).default(
      'parentbased_always_on',
    ),
    { description: 'which requests are traced; `parentbased_*` follow the sampled flag of a trusted `traceparent`' },
  ),
  OTEL_TRACES_SAMPLER_ARG: declare(decimal(0, 1).default(1), { description: 'the ratio of the `traceidratio` samplers' }),
});

export type EnvValues = z.output<typeof envSchema>;

/** The variables of every wire format's environment account, as each descriptor declares them (src/providers/<format>/). */
export const accountSchema = z.object(Object.fromEntries(FORMATS.flatMap((descriptor) => Object.entries(descriptor.environment?.variables ?? {}))));

/** Every variable with a fixed name: the gateway's own and the environment accounts'. */
export const namedVariables: Readonly<Record<string, z.ZodType>> = { ...envSchema.shape, ...accountSchema.shape };

/**
 * PROVIDER_<NAME>_<SETTING>: the guard around each provider and the hosts its images may come from,
 * one family per configured provider name (`local`, `jimeng`, the OpenAI-compatible one's).
 */
export const providerSchema = z.object({
  TIMEOUT_MS: declare(integer(100, 600_000).optional(), {
    description: 'deadline for the whole generation, retries and polling included (504 `provider_timeout`)',
    defaultText: '`PROVIDER_TIMEOUT_MS` (60000)',
  }),
  MAX_ATTEMPTS: declare(integer(1, 10).default(3), { description: 'tries in all on one channel that says it is busy; exponential backoff with jitter' }),
  RETRY_BASE_DELAY_MS: declare(integer(1, 60_000).default(500), { description: 'first backoff step' }),
  MAX_CONCURRENCY: declare(integer(1, 10_000).default(16), {
    description: 'calls in flight at once at the environment-configured account, per process; the rest queue (`CHANNEL_QUEUE_TIMEOUT_MS`)',
  }),
  BREAKER_THRESHOLD: declare(integer(1, 1000).default(5), { description: 'consecutive provider failures that open the circuit (503 with `Retry-After`)' }),
  BREAKER_COOLDOWN_MS: declare(integer(10, 3_600_000).default(30_000), { description: 'open time before one probe call is let through' }),
  IMAGE_HOSTS: declare(text.optional(), {
    description:
      "comma-separated hosts or `*.domain` (https only) this provider's image URLs may point at besides its documented result hosts (`providers.md`) and `IMAGE_FETCH_ALLOWED_HOSTS`",
    defaultText: 'none',
  }),
});

/** The prefix of a provider's PROVIDER_<NAME>_* variables. */
export function providerPrefix(name: string): string {
  return `PROVIDER_${name.toUpperCase().replace(/-/g, '_')}_`;
}

type Env = Record<string, string | undefined>;

/** Variables by name, or variables by name and what a transform makes of their values. */
type EnvSchema = z.ZodObject | z.ZodPipe<z.ZodObject, z.ZodType>;

/**
 * The schema's variables read from env (`nameOf` maps a schema key to its variable), unset or
 * empty ones at their defaults; every refused value is named in one ConfigError.
 */
export function readEnv<S extends EnvSchema>(schema: S, env: Env, nameOf: (key: string) => string = (key) => key): z.output<S> {
  const variables: z.ZodObject = schema instanceof z.ZodPipe ? schema.in : schema;
  const input: Record<string, string | undefined> = {};
  for (const [key, type] of Object.entries(variables.shape)) {
    const raw = env[nameOf(key)];
    input[key] = raw === '' && !envMeta.get(type)?.keepEmpty ? undefined : raw;
  }
  const result = schema.safeParse(input);
  if (!result.success) throw new ConfigError(result.error.issues.map((issue) => `${nameOf(String(issue.path[0]))} ${issue.message}`).join('; '));
  return result.data as z.output<S>;
}
