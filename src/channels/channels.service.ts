import type { components } from '../../generated/gateway';
import { type AuditChange, type AuditContext, REDACTED, recordAuditEvent, updateChange, withAuditEvent } from '../audit/audit-log';
import type { CatalogModel } from '../config/catalog';
import type { ChannelsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { unknownModelMessage } from '../errors/unknown-model';
import { descriptorOf, formatOfEntry } from '../providers/formats';
import { type Clock, toIsoOrNull } from '../shared/clock';
import { newId } from '../shared/ids';
import { pointsAtPrivateAddress, resolvedUrlProblem } from '../shared/safe-url';
import type { ChannelHealth, ChannelRouter } from './channel-router';
import type { CredentialSealer } from './channel-sealing';
import {
  type Channel,
  type ChannelCredentials,
  type ChannelResource,
  DEFAULT_BASE_URLS,
  channelFromRow,
  credentialsHint,
  environmentVariablesOf,
  toChannelResource,
} from './channel.model';
import * as repo from './channels.repository';

type Schemas = components['schemas'];
export type CreateChannelInput = Schemas['CreateChannelRequest'];
export type UpdateChannelInput = Schemas['UpdateChannelRequest'];
export type ChannelTestResult = Schemas['ChannelTestResult'];

/** A channel's health as the admin API reads it (the internal API adds its name and provider). */
export function channelHealthResource({ channel, circuit, usage, coolingUntil, stats }: ChannelHealth): Schemas['ChannelHealth'] {
  return {
    id: channel.id,
    status: channel.status,
    circuit,
    in_flight: usage.inFlight,
    max_concurrency: channel.maxConcurrency,
    calls_this_minute: usage.calls,
    rpm: channel.rpm,
    images_this_minute: usage.images,
    ipm: channel.ipm,
    cooling_down_until: toIsoOrNull(coolingUntil),
    calls: stats.calls,
    error_rate: stats.error_rate,
    latency_ms: stats.latency_ms,
  };
}

function channelNotFound(id: string): ApiError {
  return new ApiError('channel_not_found', `No channel with id ${id}.`, { param: 'id' });
}

const invalid = (message: string, param: string) => new ApiError('invalid_request', message, { param });

/**
 * What the audit log keeps of a channel: its resource, which has only the credentials' hint. The
 * credentials themselves are never in an event; a replacement shows as `credentials: [redacted]`.
 */
const audited = (row: ChannelsTable): Record<string, unknown> => {
  const { created_at: _created, updated_at: _updated, ...resource } = toChannelResource(channelFromRow(row));
  return resource;
};

/** The /admin/channels operations: validation, sealing, and telling the router about changes. */
export class ChannelsService {
  constructor(
    private readonly deps: {
      db: repo.Db;
      clock: Clock;
      sealer: CredentialSealer;
      router: ChannelRouter;
      catalog: ReadonlyMap<string, CatalogModel>;
      environmentChannels: Channel[];
      /** CHANNEL_ALLOW_PRIVATE_UPSTREAMS: base URLs may point at loopback/private/link-local addresses. */
      allowPrivateUpstreams: boolean;
    },
  ) {}

  /**
   * A base URL receives the account's credentials, and testChannel returns what it answers: like
   * webhook URLs, it may not point at loopback, private or link-local (metadata) addresses, literal
   * or resolved now, unless the operator allows private upstreams.
   */
  private async checkBaseUrl(baseUrl: string): Promise<void> {
    const problem = await resolvedUrlProblem(baseUrl, this.deps.allowPrivateUpstreams);
    if (problem) throw invalid(`base_url ${problem}; set CHANNEL_ALLOW_PRIVATE_UPSTREAMS=true to allow private upstreams.`, 'base_url');
  }

  /**
   * What a failed test says. An API channel on a private address (allowed by CHANNEL_ALLOW_PRIVATE_UPSTREAMS)
   * may be any internal service, and a test's message would relay its answer to whoever may write
   * channels: there only the error code is told.
   */
  private async testMessage(channel: ChannelResource, message: string): Promise<string> {
    const privateUpstream =
      channel.source === 'api' && this.deps.allowPrivateUpstreams && channel.base_url !== null && (await pointsAtPrivateAddress(channel.base_url));
    return privateUpstream ? "The upstream's answer is not shown: base_url points at a private address." : message;
  }

  private environmentChannel(id: string): Channel | undefined {
    return this.deps.environmentChannels.find((c) => c.id === id);
  }

  private async requireRow(id: string, db: repo.Db = this.deps.db): Promise<ChannelsTable> {
    if (this.environmentChannel(id)) {
      const channel = this.environmentChannel(id)!;
      throw new ApiError(
        'channel_read_only',
        `Channel ${id} is configured by environment variables (${environmentVariablesOf(channel)}); change them instead.`,
        {
          param: 'id',
        },
      );
    }
    const row = await repo.findChannelRow(db, id);
    if (!row) throw channelNotFound(id);
    return row;
  }

  /** Every model must be in the catalog, of the channel's provider and transport. */
  private checkModels(provider: string, transport: string, models: Array<{ model: string }>): void {
    const seen = new Set<string>();
    for (const { model } of models) {
      const entry = this.deps.catalog.get(model);
      if (!entry) throw invalid(unknownModelMessage([model], this.deps.catalog), 'models');
      if (seen.has(model)) throw invalid(`Model ${model} is listed twice.`, 'models');
      seen.add(model);
      if (entry.provider !== provider) throw invalid(`Model ${model} is served by provider ${entry.provider}, not ${provider}.`, 'models');
      const modelTransport = formatOfEntry(entry)?.format;
      if (modelTransport !== transport) throw invalid(`Model ${model} is served over ${modelTransport}, not ${transport}.`, 'models');
    }
  }

  /** The credentials' fields are exactly those the transport's descriptor names. */
  private checkCredentials(transport: string, credentials: ChannelCredentials): void {
    const fields = (descriptorOf(transport)?.credentials?.fields ?? []).map((field) => field.name);
    const given = Object.keys(credentials);
    if (fields.length === 0 || fields.some((field) => !given.includes(field)) || given.some((field) => !fields.includes(field))) {
      throw invalid(
        fields.length === 0 ? `${transport} channels cannot be created through the API.` : `${transport} channels take ${fields.join(' and ')}.`,
        'credentials',
      );
    }
  }

  async create(input: CreateChannelInput, audit: AuditContext): Promise<ChannelResource> {
    const now = this.deps.clock.now();
    this.checkModels(input.provider, input.transport, input.models);
    this.checkCredentials(input.transport, input.credentials);
    const baseUrl = input.base_url ?? DEFAULT_BASE_URLS[input.transport];
    if (baseUrl === undefined) throw invalid(`${input.transport} channels need base_url.`, 'base_url');
    // Checked before the transaction: it may wait for DNS.
    if (input.base_url !== undefined) await this.checkBaseUrl(input.base_url);
    const id = newId('chn');
    const row: ChannelsTable = {
      id,
      name: input.name,
      provider: input.provider,
      transport: input.transport,
      base_url: baseUrl,
      models: JSON.stringify(input.models.map((m) => ({ model: m.model, upstream_model: m.upstream_model ?? null }))),
      priority: input.priority ?? 0,
      weight: input.weight ?? 1,
      status: input.status ?? 'enabled',
      disabled_reason: null,
      disabled_at: input.status === 'disabled' ? now : null,
      max_concurrency: input.max_concurrency ?? null,
      rpm: input.rpm ?? null,
      ipm: input.ipm ?? null,
      timeout_ms: input.timeout_ms ?? 60_000,
      credentials_sealed: this.deps.sealer.seal(id, JSON.stringify(input.credentials)),
      credentials_hint: credentialsHint(input.transport, input.credentials),
      created_at: now,
      updated_at: now,
    };
    await withAuditEvent(this.deps.db, audit, now, async (trx) => {
      await repo.insertChannel(trx, row);
      return { result: undefined, change: { action: 'channel.created', target: id, before: null, after: audited(row) } };
    });
    this.deps.router.invalidate();
    return toChannelResource(channelFromRow(row));
  }

  async list(query: { provider?: string; status?: string }): Promise<{ data: ChannelResource[] }> {
    const rows = await repo.listChannelRows(this.deps.db);
    const channels = [...this.deps.environmentChannels, ...rows.map(channelFromRow)]
      .filter((c) => (query.provider === undefined || c.provider === query.provider) && (query.status === undefined || c.status === query.status))
      .sort((a, b) => b.priority - a.priority);
    return { data: channels.map(toChannelResource) };
  }

  async get(id: string): Promise<ChannelResource> {
    const environment = this.environmentChannel(id);
    if (environment) return toChannelResource(environment);
    const row = await repo.findChannelRow(this.deps.db, id);
    if (!row) throw channelNotFound(id);
    return toChannelResource(channelFromRow(row));
  }

  /** The channel's live health: in flight and this minute's calls against its limits, cool-down, this replica's breaker. */
  async health(id: string): Promise<Schemas['ChannelHealth']> {
    await this.get(id);
    // A channel added or changed on another replica within the directory's cache second.
    let [health] = await this.deps.router.health(id);
    if (!health) {
      this.deps.router.invalidate();
      [health] = await this.deps.router.health(id);
    }
    if (!health) throw channelNotFound(id);
    return channelHealthResource(health);
  }

  async update(id: string, input: UpdateChannelInput, audit: AuditContext): Promise<ChannelResource> {
    const now = this.deps.clock.now();
    if (input.base_url !== undefined) await this.checkBaseUrl(input.base_url);
    const updated = await withAuditEvent(this.deps.db, audit, now, async (trx) => {
      const current = await this.requireRow(id, trx);
      const row = await this.applyUpdate(trx, current, input, now);
      let change: AuditChange | null = updateChange('channel.updated', id, audited(current), audited(row));
      if (input.credentials !== undefined) {
        // Replaced credentials are recorded as replaced, whatever their hint.
        change ??= { action: 'channel.updated', target: id, before: {}, after: {} };
        change.before = { ...change.before, credentials: REDACTED };
        change.after = { ...change.after, credentials: REDACTED };
      }
      return { result: row, change };
    });
    this.deps.router.invalidate();
    return toChannelResource(channelFromRow(updated));
  }

  private async applyUpdate(db: repo.Db, current: ChannelsTable, input: UpdateChannelInput, now: number): Promise<ChannelsTable> {
    const { id } = current;
    const changes: Partial<ChannelsTable> = { updated_at: Math.max(now, current.updated_at + 1) };
    if (input.name !== undefined) changes.name = input.name;
    if (input.base_url !== undefined && input.base_url !== current.base_url) {
      // Else a token that may write channels could send the stored key to a host of its choosing.
      if (input.credentials === undefined) {
        throw invalid('Changing base_url needs the credentials again in the same request: the stored ones are never sent to a new address.', 'credentials');
      }
      changes.base_url = input.base_url;
    }
    if (input.models !== undefined) {
      this.checkModels(current.provider, current.transport, input.models);
      changes.models = JSON.stringify(input.models.map((m) => ({ model: m.model, upstream_model: m.upstream_model ?? null })));
    }
    if (input.priority !== undefined) changes.priority = input.priority;
    if (input.weight !== undefined) changes.weight = input.weight;
    if (input.max_concurrency !== undefined) changes.max_concurrency = input.max_concurrency;
    if (input.rpm !== undefined) changes.rpm = input.rpm;
    if (input.ipm !== undefined) changes.ipm = input.ipm;
    if (input.timeout_ms !== undefined) changes.timeout_ms = input.timeout_ms;
    if (input.credentials !== undefined) {
      this.checkCredentials(current.transport, input.credentials);
      changes.credentials_sealed = this.deps.sealer.seal(id, JSON.stringify(input.credentials));
      changes.credentials_hint = credentialsHint(current.transport, input.credentials);
    }
    if (input.status === 'enabled' && current.status !== 'enabled') Object.assign(changes, { status: 'enabled', disabled_reason: null, disabled_at: null });
    if (input.status === 'disabled' && current.status !== 'disabled') Object.assign(changes, { status: 'disabled', disabled_reason: null, disabled_at: now });
    const row = await repo.updateChannelRow(db, id, changes);
    if (!row) throw channelNotFound(id);
    return row;
  }

  async delete(id: string, audit: AuditContext): Promise<void> {
    await withAuditEvent(this.deps.db, audit, this.deps.clock.now(), async (trx) => {
      const current = await this.requireRow(id, trx);
      if (!(await repo.deleteChannelRow(trx, id))) throw channelNotFound(id);
      return { result: undefined, change: { action: 'channel.deleted', target: id, before: audited(current), after: null } };
    });
    this.deps.router.invalidate();
  }

  async test(id: string, model: string | undefined, audit: AuditContext): Promise<ChannelTestResult> {
    const channel = await this.get(id);
    const modelId = model ?? channel.models[0]?.model;
    const entry = modelId === undefined ? undefined : this.deps.catalog.get(modelId);
    if (!entry || !channel.models.some((m) => m.model === entry.model)) {
      throw invalid(
        `Channel ${id} does not serve ${modelId ?? 'any catalog model'}; it serves ${channel.models.map((m) => m.model).join(', ') || 'none'}.`,
        'model',
      );
    }
    const outcome = await this.deps.router.test(id, entry);
    const after = await this.get(id);
    const result: ChannelTestResult = {
      outcome: outcome.ok ? 'ok' : 'failed',
      latency_ms: outcome.latencyMs,
      error_code: outcome.error?.code ?? null,
      message: outcome.error ? await this.testMessage(channel, outcome.error.message) : null,
      channel: after,
    };
    // The test is an upstream call of up to timeout_ms: no transaction is held across it. Its event
    // (written after) has the status before and after, so a re-enable or disable by a test shows.
    await recordAuditEvent(
      this.deps.db,
      audit,
      {
        action: 'channel.tested',
        target: id,
        before: { status: channel.status },
        after: { status: after.status, model: entry.model, outcome: result.outcome, error_code: result.error_code, latency_ms: result.latency_ms },
      },
      this.deps.clock.now(),
    );
    return result;
  }
}
