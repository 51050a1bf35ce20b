/** Table shapes as stored. Times are epoch milliseconds (bigint on PostgreSQL, integer on SQLite). */
export interface ApiKeysTable {
  id: string;
  key_hash: string;
  hint: string;
  name: string;
  owner: string;
  /** 'active' | 'disabled'; "expired" is derived from expires_at. */
  status: string;
  credits_quota: number;
  /** Credits spent or reserved in the current book (usage_epoch), which counts the period that started at period_started_at. */
  credits_used: number;
  quota_period_days: number;
  period_started_at: number;
  /**
   * Number of the book credits_used counts. Opened anew (+1, counter zeroed) by reset_usage and by
   * every roll-over to a new period; a period length change that carries usage over keeps it.
   */
  usage_epoch: number;
  rate_limit_rpm: number;
  /** JSON array of provider names. */
  allowed_providers: string;
  expires_at: number | null;
  created_at: number;
  updated_at: number;
  disabled_at: number | null;
  last_used_at: number | null;
  /** Generations in flight at once (null = no cap). */
  max_concurrent: number | null;
  /** JSON array of CIDRs, or null for anywhere. */
  allowed_ips: string | null;
  /** JSON array of catalog model ids, or null for every model of the allowed providers. */
  allowed_models: string | null;
  /** JSON object of strings: text on SQLite, jsonb on PostgreSQL (read back as an object there). */
  metadata: string | Record<string, string>;
  /** JSON array of percentages. */
  alert_thresholds: string;
  /** JSON PromptRule[] (0026, src/guardrails/prompt-rules.ts); null = none. */
  prompt_rules?: string | null;
  /** The project the key belongs to (0027, src/projects/); null = none. */
  project_id?: string | null;
}

/** A project (0027, src/projects/): a book like a key's (same columns, same period rules) above its keys. */
export interface ProjectsTable {
  id: string;
  name: string;
  owner: string;
  /** 'active' | 'disabled' */
  status: string;
  credits_quota: number;
  credits_used: number;
  quota_period_days: number;
  period_started_at: number;
  usage_epoch: number;
  /** Requests per minute across its keys (null = none). */
  rate_limit_rpm: number | null;
  /** Generations in flight across its keys (null = none). */
  max_concurrent: number | null;
  /** JSON arrays narrowing its keys' own lists (null = no narrowing). */
  allowed_providers: string | null;
  allowed_models: string | null;
  /** JSON prompt rules its keys' own add to (null = none). */
  prompt_rules: string | null;
  /** What its settled generations keep of their prompt (0030): 'full' | 'hash' | 'none'; null = the gateway's PROMPT_RETENTION. */
  prompt_retention?: string | null;
  metadata: string | Record<string, string>;
  created_at: number;
  updated_at: number;
  disabled_at: number | null;
  /** JSON {url, timeout_ms, failure_mode} of its moderation hook (0029, src/guardrails/moderation-hook.ts); null = none. */
  moderation_hook?: string | null;
  /** The hook's `whsec_` secret, sealed (src/webhooks/secret-sealing.ts); null with no hook. */
  moderation_hook_secret?: string | null;
  /** After a rotation (0031): the old secret, sealed, which still signs the hook's calls until the time below. */
  moderation_hook_previous_secret?: string | null;
  moderation_hook_previous_secret_expires_at?: number | null;
}

export interface GenerationsTable {
  id: string;
  /** The client key (gateway generations); null for internal ones. */
  key_id: string | null;
  /** The service token's client id (internal generations); null for gateway ones. */
  client_id: string | null;
  model: string;
  provider: string;
  images: number;
  credits: number;
  /** 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled' */
  status: string;
  error_code: string | null;
  latency_ms: number | null;
  /** The quota period the credits were reserved in. */
  period_started_at: number;
  created_at: number;
  completed_at: number | null;
  /** The key's book (api_keys.usage_epoch) the credits were charged to; a release only refunds that book. Null for internal generations. */
  usage_epoch: number | null;
  /** JSON StoredGenerationRequest (src/generation/durable.ts): what a worker needs to run it; null on rows from before 0012. */
  request: string | null;
  /** The worker (process) holding the running generation, and until when unless renewed. */
  lease_owner: string | null;
  lease_expires_at: number | null;
  started_at: number | null;
  /** 1 when a client asked to cancel a running generation: its lease holder stops at renewal. */
  cancel_requested: number;
  error_message: string | null;
  /** How many times it was claimed: above 1, the current run took over from a process that died. */
  runs: number;
  /**
   * Credits kept from a generation that delivered nothing (canceled or disconnected after its upstream
   * calls were sent; src/generation/charges.ts). Defaults to 0 on insert.
   */
  charged_credits?: number;
  /** Images made (or possibly made) upstream that no key paid for: the operator's loss, with its reason. */
  unbilled_images?: number;
  unbilled_reason?: string | null;
  /**
   * The model the client asked for, when the generation continued on a fallback (0023): `model` and
   * `provider` then name the one that ran last (and delivered, when it succeeded). Null otherwise.
   */
  requested_model?: string | null;
  /** What was applied to the prompt in `request` once settled (0025): null = still kept; `hash` or `none` (src/maintenance/prompt-retention.ts). */
  prompt_retention?: string | null;
  /** The key's project when the credits were reserved, and the project's book they came from (0027); null without one. */
  project_id?: string | null;
  project_usage_epoch?: number | null;
  /**
   * What its project's moderation hook answered before it was reserved (0029): 'allow' (a block
   * leaves no row), the call's latency, the endpoint's reason, and why the hook failed when the
   * project fails open. Null when no hook was asked.
   */
  moderation_decision?: string | null;
  moderation_latency_ms?: number | null;
  /** The upstream's estimated cost in US dollars (0034, src/usage/upstream-cost.ts); null when its model has no money price. */
  upstream_cost_usd?: number | null;
  moderation_reason?: string | null;
  moderation_failure?: string | null;
}

/** One upstream call sent for an image of a generation: the visual task id once the upstream accepted it. */
export interface GenerationTasksTable {
  generation_id: string;
  image_index: number;
  channel_id: string;
  task_id: string | null;
  sent_at: number;
}

/**
 * One lease per row and scope (src/leases/): a counted request, a slot in flight, a call and its
 * images, a cool-down, the probe lease. Rows past expires_at count for nothing and are pruned.
 */
export interface LeasesTable {
  /** `owner:name`, e.g. `key:<id>:rpm`, `channel:<id>:concurrency`. */
  scope: string;
  lease_id: string;
  units: number;
  expires_at: number;
}

/** Stored first responses for Idempotency-Key retries (Stripe semantics), per caller scope. */
export interface IdempotencyKeysTable {
  /** `key:<key id>` for clients, `admin` for the admin secret. */
  scope: string;
  idempotency_key: string;
  /** SHA-256 over method, path and body: a retry must send the same request. */
  request_hash: string;
  /** 'running' | 'done' */
  state: string;
  response_status: number | null;
  response_body: string | null;
  /** Location header of the first response, if any. */
  response_location: string | null;
  created_at: number;
  /** The request holding a 'running' claim (process and request); null once done. */
  lease_owner: string | null;
  /** Until when the claim holds unless renewed; a retry takes over a lapsed one. */
  lease_expires_at: number;
}

/** Scoped admin tokens (`hyadm_...`); only the SHA-256 of the secret is stored. */
export interface AdminTokensTable {
  id: string;
  token_hash: string;
  hint: string;
  name: string;
  /** JSON array of AdminScope values. */
  scopes: string;
  /** `root` or the id of the admin token that created this one. */
  created_by: string;
  expires_at: number | null;
  created_at: number;
  revoked_at: number | null;
}

/** A console single sign-on under way: created by its start, consumed by its callback (src/console-sso). */
export interface ConsoleSsoLoginsTable {
  /** SHA-256 of the `state` sent to the issuer. */
  state_hash: string;
  issuer_id: string;
  code_verifier: string;
  nonce: string;
  redirect_uri: string;
  expires_at: number;
}

/** A console session from a single sign-on: the cookie holds its secret, the row its hash. */
export interface ConsoleSessionsTable {
  id: string;
  token_hash: string;
  /** SHA-256 of the CSRF token its state-changing requests must send. */
  csrf_hash: string;
  issuer_id: string;
  /** The ID token's `sub`. */
  subject: string;
  email: string | null;
  /** JSON array of AdminScope values, mapped from the person's groups at sign-in. */
  scopes: string;
  /** The ID token, sent back as `id_token_hint` at logout. */
  id_token: string;
  created_at: number;
  last_seen_at: number;
  expires_at: number;
  revoked_at: number | null;
}

/** Append-only record of admin changes, written in the transaction of the change. */
export interface AuditEventsTable {
  id: string;
  created_at: number;
  /** `root`, an admin token id, or a service's client id. */
  actor: string;
  /** `<resource>.<verb>`, e.g. `key.updated`. */
  action: string;
  target: string;
  /** JSON of the changed fields before / after (secrets redacted); null when there is no side. */
  before: string | null;
  after: string | null;
  request_id: string;
  client_ip: string;
}

/** An image the gateway stored (0011); its bytes live in the image store under its id. */
export interface StoredImagesTable {
  id: string;
  generation_id: string;
  /** Index of the image within its generation's answer (outputs) or request (inputs). */
  position: number;
  /** 'output' (generated), 'input' (an image of the request's `images`) or 'mask'. */
  role: 'output' | 'input' | 'mask';
  /**
   * Who may name it as an input (0022): the key of the generation that stored it, or for the internal
   * API its service client (then key_id is null). Kept on the image: the generation row may be deleted first.
   */
  key_id: string | null;
  client_id: string | null;
  /** image/png | image/jpeg | image/webp, from the bytes (inputs also image/gif | image/bmp | image/tiff). */
  content_type: string;
  byte_size: number;
  /** Hex SHA-256 of the bytes: the ETag. */
  sha256: string;
  width: number;
  height: number;
  created_at: number;
  /** created_at + retention: URLs never outlive it; the sweeper deletes the bytes after it. */
  expires_at: number;
  /** When the sweeper deleted the bytes; the row (a tombstone: URLs answer 410) goes a day later. */
  deleted_at: number | null;
}

/** An upstream account (channel) added through the admin API. */
export interface ChannelsTable {
  id: string;
  name: string;
  provider: string;
  /** 'visual' | 'ark' | 'images-api' */
  transport: string;
  base_url: string;
  /** JSON array of {model, upstream_model}. */
  models: string;
  priority: number;
  weight: number;
  /** 'enabled' | 'disabled' | 'auto_disabled' */
  status: string;
  disabled_reason: string | null;
  disabled_at: number | null;
  max_concurrency: number | null;
  rpm: number | null;
  ipm: number | null;
  timeout_ms: number;
  /** AES-256-GCM sealed JSON credentials (see channel-sealing.ts); never the clear text. */
  credentials_sealed: string;
  credentials_hint: string;
  created_at: number;
  updated_at: number;
}

/** One upstream call made for a generation, on which channel, and how it ended. */
export interface GenerationAttemptsTable {
  generation_id: string;
  seq: number;
  image_index: number;
  channel_id: string;
  /** 'succeeded' | 'failed' | 'failed_over' */
  outcome: string;
  error_code: string | null;
  latency_ms: number;
  started_at: number;
  /** The catalog model the call was for (0023): a generation's fallbacks show as a change of model; null on older rows. */
  model?: string | null;
  /** The tokens the upstream reported for the call (0024), OpenAI's `usage` object as JSON; null when it reported none. */
  upstream_usage?: string | null;
}

/** A receiver of events (Standard Webhooks). */
export interface WebhookEndpointsTable {
  id: string;
  url: string;
  description: string;
  /** JSON array of event types. */
  event_types: string;
  /** 'enabled' | 'disabled' */
  status: string;
  disabled_reason: string | null;
  disabled_at: number | null;
  /** Start of the current run of failed attempts (null after a success). */
  failing_since: number | null;
  /** `whsec_...` sealed (src/webhooks/secret-sealing.ts), as is previous_secret: signing needs it, so not hashed. */
  secret: string;
  /** Still signs (beside `secret`) until previous_secret_expires_at, after a rotation. */
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  created_at: number;
  updated_at: number;
}

/** The outbox: one row per event, written in the transaction of the change that caused it. */
export interface EventsTable {
  id: string;
  type: string;
  /** The JSON body every endpoint receives: {type, timestamp, data}. */
  payload: string;
  /** Unique when set: an event that must happen once (per key, threshold and period, say). */
  dedupe_key: string | null;
  created_at: number;
}

export interface WebhookDeliveriesTable {
  id: string;
  event_id: string;
  endpoint_id: string;
  /** 'pending' | 'succeeded' | 'failed' */
  status: string;
  attempts: number;
  next_attempt_at: number;
  /** A dispatcher holds the delivery until then; past it, any replica may claim it again. */
  lease_expires_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  completed_at: number | null;
  /** Completion webhooks (0015): sent here, not to the endpoint, signed with signing_key_id's key secret. */
  target_url?: string | null;
  signing_key_id?: string | null;
}

/** A client key's completion-webhook signing secret, sealed (0015). */
export interface KeyWebhookSecretsTable {
  key_id: string;
  secret: string;
  created_at: number;
}

export interface WebhookAttemptsTable {
  delivery_id: string;
  attempt: number;
  attempted_at: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

/**
 * One hour's usage of one key on one model, provider and channel, per outcome (0018), written in
 * each settlement's transaction (src/usage/usage-rollups.repository.ts), like the other rollup tables. Plus lat_00 ... lat_47:
 * the latency histogram of its delivered generations (src/usage/latency-histogram.ts).
 */
export interface UsageRollupsTable {
  hour_start: number;
  key_id: string;
  model: string;
  provider: string;
  /** The channel of the generation's last upstream attempt; '' when none (cancels, no call recorded). */
  channel_id: string;
  /** 'succeeded' | 'failed' | 'canceled' | 'blocked' (refused by the gateway's guardrails: no generation row, 0028) */
  status: string;
  /** '' for successes. */
  error_code: string;
  requests: number;
  images: number;
  credits: number;
  /** Summed upstream cost estimate in US dollars (0034); NULL while no generation of the row had one. */
  upstream_cost_usd?: number | null;
  /** The credits of the generations whose upstream cost is known: what `upstream_cost_usd` is set against (0 on insert). */
  costed_credits?: number;
  /** NULL for an empty bucket. */
  [latencyColumn: `lat_${string}`]: number | null;
}

/** usage_rollups without the key: the same sums per model, provider and channel. */
export type UsageRollupTotalsTable = Omit<UsageRollupsTable, 'key_id'>;

/** usage_rollups per UTC day and key, over every model, provider and channel. */
export type UsageKeyDaysTable = Omit<UsageRollupsTable, 'hour_start' | 'model' | 'provider' | 'channel_id'> & { day_start: number };

/** usage_rollup_totals per UTC day (0021). */
export type UsageDayTotalsTable = Omit<UsageRollupTotalsTable, 'hour_start'> & { day_start: number };

/**
 * One calendar month's (UTC) usage of one key over every model, provider and channel (0021): the
 * outcomes as counts, no error codes and no latency histogram.
 */
export interface UsageKeyMonthsTable {
  month_start: number;
  key_id: string;
  requests: number;
  succeeded: number;
  failed: number;
  canceled: number;
  /** Requests refused by the gateway's guardrails (0028); counted in `requests` too. */
  blocked: number;
  images: number;
  credits: number;
  upstream_cost_usd?: number | null;
  costed_credits?: number;
}

export interface Database {
  usage_rollups: UsageRollupsTable;
  usage_rollup_totals: UsageRollupTotalsTable;
  usage_key_days: UsageKeyDaysTable;
  usage_day_totals: UsageDayTotalsTable;
  usage_key_months: UsageKeyMonthsTable;
  webhook_endpoints: WebhookEndpointsTable;
  events: EventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  key_webhook_secrets: KeyWebhookSecretsTable;
  admin_tokens: AdminTokensTable;
  console_sso_logins: ConsoleSsoLoginsTable;
  console_sessions: ConsoleSessionsTable;
  audit_events: AuditEventsTable;
  idempotency_keys: IdempotencyKeysTable;
  leases: LeasesTable;
  api_keys: ApiKeysTable;
  projects: ProjectsTable;
  generations: GenerationsTable;
  stored_images: StoredImagesTable;
  channels: ChannelsTable;
  generation_attempts: GenerationAttemptsTable;
  generation_tasks: GenerationTasksTable;
}
