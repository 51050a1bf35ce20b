import type { CatalogModel } from '../config/catalog';
import { ApiError } from '../errors/api-error';
import { formatOfEntry } from '../providers/formats';
import { UpstreamError } from '../providers/upstream-errors';
import type { ChannelClient } from './channel-clients';
import type { ChannelDirectory } from './channel-directory';
import type { ChannelLimitStore, ChannelUsage } from './channel-limits';
import type { ChannelRouterDeps, ChannelRuntimes } from './channel-runtime';
import { type Channel, servesModel } from './channel.model';

/** How often a request waiting for a slot looks again (a release on this replica wakes it at once). */
const QUEUE_POLL_MS = 50;

/** A call's place in its model's saturation line; `wake` ends its current wait early. */
interface QueueTicket {
  wake: () => void;
}

/** Whether a model's channels could take a call now (ChannelWaitLine.roomFor). */
export type ModelRoom = 'room' | 'full' | 'down';

/** What choosing a channel needs of the request: its model, its one deadline, its cancellation. */
export interface CallScope {
  entry: CatalogModel;
  deadline: number;
  signal: AbortSignal;
}

export interface PickedChannel {
  channel: Channel;
  client: ChannelClient;
  leaseId: string | undefined;
}

/** Weighted random order (Efraimidis-Spirakis): the first is picked with probability weight / total. */
function weightedOrder<T extends { channel: Channel }>(items: T[]): T[] {
  return items
    .map((item) => ({ item, key: Math.random() ** (1 / Math.max(1, item.channel.weight)) }))
    .sort((a, b) => b.key - a.key)
    .map((entry) => entry.item);
}

/** Highest priority tier first, weighted random within each tier. */
function routingOrder<T extends { channel: Channel }>(items: T[]): T[] {
  // One candidate (most models): its order is itself, without drawing random keys.
  if (items.length <= 1) return items;
  const tiers = [...new Set(items.map((i) => i.channel.priority))].sort((a, b) => b - a);
  return tiers.flatMap((priority) => weightedOrder(items.filter((i) => i.channel.priority === priority)));
}

const retryAfterHeader = (ms: number) => ({ 'Retry-After': String(Math.max(1, Math.ceil(ms / 1000))) });

type WaitLineDeps = Pick<ChannelRouterDeps, 'clock' | 'queueTimeoutMs' | 'queueMaxWaiters'>;

/** Picks the channel for a call's next try, or keeps the call waiting in its model's line until one frees. */
export class ChannelWaitLine {
  /**
   * Calls waiting for a slot on this replica, per model, in arrival order (bounded by queueMaxWaiters).
   * The first of a line polls the limit store every QUEUE_POLL_MS and is woken by a local release; the
   * k-th polls every k+1 periods, so a saturated model costs the store a number of round trips per replica
   * that grows with the log of the line's length, not with it, while a call the first cannot stand for
   * (it failed over from another channel, or asks for more images) still gets its own turns.
   */
  private readonly lines = new Map<string, QueueTicket[]>();

  constructor(
    private readonly deps: WaitLineDeps,
    private readonly directory: ChannelDirectory,
    private readonly runtimes: ChannelRuntimes,
  ) {}

  /** Calls waiting for a slot on this replica, per model (the saturation queue's depth). */
  waitingByModel(): Array<[string, number]> {
    return [...this.lines].map(([model, line]) => [model, line.length] as [string, number]).filter(([, count]) => count > 0);
  }

  /** A slot was given back: it may serve any model of its channel, so the first call of each line tries. */
  slotFreed(): void {
    for (const line of this.lines.values()) line[0]?.wake();
  }

  /**
   * Whether a call for `entry` could start now on some channel (`room`): enabled, breaker not open,
   * not cooling down, under its concurrency cap, its limit store answering. Only a hint (no slot is
   * taken): the durable worker leaves work queued while it is not, so a burst waits in the queue
   * rather than in sockets, and work queued during a Redis outage waits for Redis instead of failing.
   * `full` when a channel that could serve is cooling down, at its cap or its store is not answering
   * (the work waits for it); `down` when no channel serves the model usably (none, all disabled,
   * circuits open): work for it would only fail, or continue on a fallback (generation-worker.ts modelHasRoom).
   */
  async roomFor(entry: CatalogModel): Promise<ModelRoom> {
    const now = this.deps.clock.now();
    let room: ModelRoom = 'down';
    for (const { channel, client } of await this.directory.channels()) {
      if (!servesModel(channel, entry) || channel.status !== 'enabled' || client === undefined) continue;
      const runtime = this.runtimes.runtime(channel);
      if (runtime.breaker.state === 'open') continue;
      room = 'full';
      if (runtime.coolingUntil > now) continue;
      let usage: ChannelUsage;
      try {
        usage = await this.runtimes.limitsOf(channel).usage(channel.id, now);
      } catch {
        // Logged by the store's health; a slot could not be taken there now.
        continue;
      }
      if (channel.maxConcurrency === null || usage.inFlight < channel.maxConcurrency) return 'room';
    }
    return room;
  }

  /**
   * The channel for the next try: candidates are the enabled channels of the model not yet failed,
   * breaker not open, not cooling down, under their limits. When all are saturated or cooling,
   * waits (bounded by CHANNEL_QUEUE_TIMEOUT_MS and the deadline, at most CHANNEL_QUEUE_MAX_WAITERS
   * calls of a model at once), then 503 provider_busy.
   */
  async acquire(scope: CallScope, images: number, failedOver: ReadonlySet<string>, lastError: UpstreamError | undefined): Promise<PickedChannel> {
    const { entry } = scope;
    const queueDeadline = Math.min(this.deps.clock.now() + this.deps.queueTimeoutMs, scope.deadline);
    let ticket: QueueTicket | undefined;
    try {
      return await this.acquireOrWait(scope, images, failedOver, lastError, queueDeadline, () => {
        // Joins the line once; a full line answers at once rather than piling up callers.
        if (ticket) return ticket;
        const line = this.lines.get(entry.model) ?? [];
        if (line.length >= this.deps.queueMaxWaiters) return undefined;
        ticket = { wake: () => undefined };
        line.push(ticket);
        this.lines.set(entry.model, line);
        return ticket;
      });
    } finally {
      if (ticket) this.leaveLine(entry.model, ticket);
    }
  }

  private async acquireOrWait(
    scope: CallScope,
    images: number,
    failedOver: ReadonlySet<string>,
    lastError: UpstreamError | undefined,
    queueDeadline: number,
    joinQueue: () => QueueTicket | undefined,
  ): Promise<PickedChannel> {
    const { entry } = scope;
    // Once a request found every channel it knew cooling down, it reads the list again: another
    // replica may have added one that serves at once.
    let reread = false;
    let rereadNow = false;
    for (;;) {
      scope.signal.throwIfAborted();
      const listed = rereadNow ? await this.directory.reread() : await this.directory.channels();
      rereadNow = false;
      let serving = listed.filter((r) => servesModel(r.channel, entry));
      // The cached list may predate a channel just created on another replica: read it again once.
      if (serving.length === 0) serving = (await this.directory.reread()).filter((r) => servesModel(r.channel, entry));
      if (serving.length === 0) throw this.unconfigured(entry);
      const enabled = serving.filter((r) => r.channel.status === 'enabled' && r.client !== undefined && !failedOver.has(r.channel.id));
      if (enabled.length === 0) throw this.finalError(entry, lastError);
      const closed = enabled.filter((r) => this.runtimes.runtime(r.channel).breaker.state !== 'open');
      if (closed.length === 0) {
        const seconds = Math.min(...enabled.map((r) => this.runtimes.runtime(r.channel).breaker.retryAfterMs()));
        throw new ApiError(
          'provider_unavailable',
          `Provider ${entry.provider} is failing on every channel of ${entry.model}; calls are paused (circuit open).`,
          {
            headers: retryAfterHeader(seconds),
          },
        );
      }
      const now = this.deps.clock.now();
      let soonestMs = Infinity;
      let storeFailure: unknown;
      // Whether every candidate is refused only for a cool-down, whose end is known and nothing frees sooner.
      let onlyCooling = true;
      for (const candidate of routingOrder(closed)) {
        const { channel } = candidate;
        const runtime = this.runtimes.runtime(channel);
        if (runtime.coolingUntil > now) {
          soonestMs = Math.min(soonestMs, runtime.coolingUntil - now);
          continue;
        }
        if (!runtime.breaker.tryAcquire()) {
          onlyCooling = false;
          continue;
        }
        const checkedAt = this.deps.clock.now();
        let taken: Awaited<ReturnType<ChannelLimitStore['acquire']>>;
        try {
          taken = await this.runtimes.limitsOf(channel).acquire(channel.id, this.runtimes.caps(channel), images, checkedAt);
        } catch (error) {
          // Its limit store failed (Redis or the database down): a half-open breaker's one probe must not
          // stay taken, and a channel whose limits live elsewhere (in this process) may still serve.
          runtime.breaker.onNeutral();
          storeFailure ??= error;
          onlyCooling = false;
          continue;
        }
        if ('leaseId' in taken) return { channel, client: candidate.client!, leaseId: taken.leaseId };
        runtime.breaker.onNeutral();
        // Cooling down on another replica's word: skip the store until then.
        if (taken.refused === 'cooling_down') runtime.coolingUntil = Math.max(runtime.coolingUntil, checkedAt + taken.retryAfterMs);
        else onlyCooling = false;
        soonestMs = Math.min(soonestMs, taken.retryAfterMs);
      }
      // Nothing to wait for: no channel is at a limit that frees, and a store that failed answers with its outage.
      if (storeFailure !== undefined && !Number.isFinite(soonestMs)) throw storeFailure;
      const remaining = queueDeadline - this.deps.clock.now();
      const retryAfter = retryAfterHeader(Number.isFinite(soonestMs) ? soonestMs : 1000);
      // Every channel cools down past the queue's deadline (an upstream's Retry-After or RetryInfo):
      // waiting could not help, and the answer passes on the upstream's own delay.
      if (remaining > 0 && onlyCooling && soonestMs > remaining && !reread) {
        reread = rereadNow = true;
        continue;
      }
      if (remaining <= 0 || (onlyCooling && soonestMs > remaining)) {
        throw new UpstreamError('provider_busy', `Every channel of ${entry.model} is at its limit or busy; retry shortly.`, false, { headers: retryAfter });
      }
      const ticket = joinQueue();
      if (!ticket) {
        throw new UpstreamError('provider_busy', `Every channel of ${entry.model} is at its limit or busy, and its queue is full; retry shortly.`, false, {
          headers: retryAfter,
        });
      }
      const position = Math.max(0, this.lines.get(entry.model)?.indexOf(ticket) ?? 0);
      const period = Math.min(QUEUE_POLL_MS, Number.isFinite(soonestMs) ? Math.max(1, soonestMs) : QUEUE_POLL_MS);
      await this.waitForSlot(ticket, Math.min(remaining, period * (position + 1)), scope.signal);
    }
  }

  private waitForSlot(ticket: QueueTicket, ms: number, signal: AbortSignal): Promise<void> {
    // Aborted while it looked for a slot: the caller's loop throws at once (an abort listener added now would never fire).
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        ticket.wake = () => undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      ticket.wake = done;
    });
  }

  /** Leaves the line; when the call was first, the next one starts polling at once. */
  private leaveLine(model: string, ticket: QueueTicket): void {
    const line = this.lines.get(model);
    if (!line) return;
    const at = line.indexOf(ticket);
    if (at === -1) return;
    line.splice(at, 1);
    if (line.length === 0) this.lines.delete(model);
    else if (at === 0) line[0]?.wake();
  }

  /** When no channel is left to try: the last failure (busy ones with a Retry-After), else unavailable. */
  private finalError(entry: CatalogModel, lastError: UpstreamError | undefined): ApiError {
    if (lastError?.code === 'provider_busy') {
      const settings = this.runtimes.settingsOf(entry.provider);
      return new UpstreamError('provider_busy', `${lastError.message} (gave up after trying every channel)`, false, {
        headers: retryAfterHeader(lastError.traits.retryAfterMs ?? settings.retryBaseDelayMs * 2 ** settings.maxAttempts),
      });
    }
    return lastError ?? new ApiError('provider_unavailable', `No enabled channel serves ${entry.model} now; see GET /admin/channels.`, { param: 'model' });
  }

  private unconfigured(entry: CatalogModel): ApiError {
    // The variables that make the environment account: its credentials (formats.ts / descriptor.ts).
    const environment = formatOfEntry(entry)?.environment;
    const variables = Object.values(environment?.credentials ?? {}).join(' and ') || 'its environment variables';
    return new ApiError('provider_unavailable', `Provider ${entry.provider} is not configured on this gateway: set ${variables}, or add a channel.`, {
      param: 'model',
    });
  }
}
