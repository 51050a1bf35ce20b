import type { UpstreamError } from '../providers/upstream-errors';
import { emitChannelAutoDisabled } from '../events/channel-events';
import { type ChannelClient, apiChannelClient } from './channel-clients';
import type { ChannelRouterDeps } from './channel-runtime';
import { type Channel, type ChannelCredentials, channelFromRow } from './channel.model';
import * as repo from './channels.repository';

/** How long the channel list (and so a status change made on another replica) may be stale. */
const DIRECTORY_TTL_MS = 1000;

export interface Routable {
  channel: Channel;
  /** Undefined when the credentials cannot be opened (a sealing key is missing): never chosen. */
  client: ChannelClient | undefined;
}

type DirectoryDeps = Pick<ChannelRouterDeps, 'db' | 'writes' | 'clock' | 'logger' | 'sealer' | 'environment' | 'pollIntervalMs' | 'allowPrivateUpstreams'>;

/**
 * Every channel with its client: the environment's and the database's, the latter's credentials
 * opened once per change and sealed again when their key is not the newest. Status changes made
 * here (auto-disable) reach the other replicas through the database.
 */
export class ChannelDirectory {
  private directory: { loadedAt: number; channels: Routable[] } | undefined;
  private loading: Promise<Routable[]> | undefined;
  /** The read that starts once `loading` ends, shared by every caller of `reread` meanwhile. */
  private next: Promise<Routable[]> | undefined;
  private readonly clients = new Map<string, { version: number; client: ChannelClient | undefined }>();

  constructor(private readonly deps: DirectoryDeps) {}

  /** Every channel (environment first), re-read from the database at most once a second. */
  async channels(): Promise<Routable[]> {
    const now = this.deps.clock.now();
    if (this.directory && now - this.directory.loadedAt < DIRECTORY_TTL_MS) return this.directory.channels;
    this.loading ??= this.startLoad();
    return this.loading;
  }

  /**
   * The channel list read from the database after this call: for a model that looks unconfigured in
   * the cached list, which may predate a channel created on another replica. A flood of such
   * requests costs one read at a time: callers while a read runs share the one that follows it.
   */
  async reread(): Promise<Routable[]> {
    if (!this.loading) {
      this.loading = this.startLoad();
      return this.loading;
    }
    // The read in flight may have begun before what this caller must see was committed.
    this.next ??= this.loading
      .catch(() => undefined)
      .then(() => {
        this.next = undefined;
        this.loading ??= this.startLoad();
        return this.loading;
      });
    return this.next;
  }

  private startLoad(): Promise<Routable[]> {
    return this.load().finally(() => {
      this.loading = undefined;
    });
  }

  /** Forget the cached list: the next request reads the database (after a change on this replica). */
  invalidate(): void {
    this.directory = undefined;
  }

  private async load(): Promise<Routable[]> {
    const loadedAt = this.deps.clock.now();
    const rows = await repo.listChannelRows(this.deps.db);
    const fromApi = rows.map((row) => {
      const channel = channelFromRow(row);
      return { channel, client: this.clientFor(channel, row.credentials_sealed) };
    });
    const fromEnvironment = this.deps.environment.channels.map((channel) => ({
      channel,
      client: this.deps.environment.providers.environmentClient(channel.provider, channel.transport),
    }));
    const channels = [...fromEnvironment, ...fromApi];
    const live = new Set(rows.map((r) => r.id));
    for (const id of this.clients.keys()) if (!live.has(id)) this.clients.delete(id);
    this.directory = { loadedAt, channels };
    // Credentials sealed with an older key are sealed again with the newest (rotation).
    for (const row of rows) {
      if (this.deps.sealer.isStale(row.credentials_sealed) && this.clients.get(row.id)?.client) {
        const opened = this.openCredentials(row.id, row.credentials_sealed);
        if (opened) {
          repo
            .resealCredentials(this.deps.db, row.id, row.credentials_sealed, this.deps.sealer.seal(row.id, JSON.stringify(opened)))
            .catch((error: unknown) => this.deps.logger.warn({ err: error, channel_id: row.id }, 'could not re-seal channel credentials'));
        }
      }
    }
    return channels;
  }

  private openCredentials(id: string, sealed: string): ChannelCredentials | undefined {
    try {
      return JSON.parse(this.deps.sealer.open(id, sealed)) as ChannelCredentials;
    } catch (error) {
      // The message names the key id, never the credentials.
      this.deps.logger.error({ channel_id: id, reason: (error as Error).message }, 'cannot open channel credentials; the channel is skipped');
      return undefined;
    }
  }

  /** Clients are kept per channel version (updated_at), so credentials are opened once per change. */
  private clientFor(channel: Channel, sealed: string): ChannelClient | undefined {
    const cached = this.clients.get(channel.id);
    if (cached && cached.version === channel.updatedAt) return cached.client;
    const credentials = this.openCredentials(channel.id, sealed);
    const client =
      credentials && apiChannelClient(channel, credentials, { pollIntervalMs: this.deps.pollIntervalMs, publicOnly: !this.deps.allowPrivateUpstreams });
    this.clients.set(channel.id, { version: channel.updatedAt, client });
    return client;
  }

  /**
   * Takes an API channel out after an account error, on every replica (they re-read within a second).
   * The channel.auto_disabled event is written in the same transaction, and only when this update
   * changed the row (it is conditional on `enabled`), so replicas seeing the same error emit it once.
   */
  async autoDisable(channel: Channel, failure: UpstreamError): Promise<void> {
    // Environment channels are read-only: their account is fixed in the environment.
    if (channel.source !== 'api') return;
    const reason = failure.traits.accountProblem ?? failure.message;
    try {
      const disabled = await this.deps.writes.run(async (trx) => {
        const now = this.deps.clock.now();
        if (!(await repo.autoDisableChannel(trx, channel.id, reason, now))) return false;
        await emitChannelAutoDisabled(
          trx,
          { channelId: channel.id, provider: channel.provider, reason: reason.slice(0, 500), statusCode: failure.traits.statusCode },
          now,
        );
        return true;
      });
      if (disabled) this.deps.logger.warn({ channel_id: channel.id, reason }, 'channel auto-disabled after an account error');
      this.invalidate();
    } catch (error) {
      this.deps.logger.error({ err: error, channel_id: channel.id }, 'could not auto-disable a channel');
    }
  }

  /** Puts an auto-disabled channel back in service after a passing test. */
  async reEnable(channel: Channel): Promise<void> {
    await repo.updateChannelRow(this.deps.db, channel.id, { status: 'enabled', disabled_reason: null, disabled_at: null, updated_at: this.deps.clock.now() });
    this.deps.logger.info({ channel_id: channel.id }, 'channel re-enabled after a passing test');
    this.invalidate();
  }
}
