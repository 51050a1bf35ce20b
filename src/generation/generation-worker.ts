import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { ModelRoom } from '../channels/channel-router';
import { type CatalogModel, fallbackChain } from '../config/catalog';
import type { Database, GenerationsTable } from '../db/schema';
import type { Clock } from '../shared/clock';
import { AbortLink } from '../shared/abort-chain';
import { RenewedSet } from '../shared/renewed-set';
import { RunDeferred } from './generation-runner';
import { LeaseLost } from './lease';
import { claimNextGeneration, claimQueuedGeneration, claimableModels, renewGenerationLeases } from './durable.repository';

export interface GenerationWorkerDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** How long a claim holds without renewal; a holder renews every third of it. */
  leaseMs: number;
  /** How often the worker looks for work queued elsewhere or left by a dead process. */
  pollMs: number;
  /** Background runs at once on this process (the sync path is bounded by its requests). */
  maxRunning: number;
  /** The models among `models` that have channel room now: work of the others stays queued. */
  modelsWithRoom(models: string[]): Promise<string[]>;
  /** Runs a claimed generation to its settlement. */
  execute(row: GenerationsTable, signal: AbortSignal): Promise<unknown>;
  /** The lease owner this worker claims as (newLeaseOwner()); the runner marks its sends with the same. */
  owner?: string;
}

/** A lease owner unique to this process (and worker): host, pid and random bits. */
export function newLeaseOwner(): string {
  return `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * Runs durable generations. Every gateway process has one: it claims queued work with a lease
 * (renewed while running), takes over work whose lease lapsed because its process died, and takes
 * work only for models whose channels have room, so a burst waits in the table, not in sockets.
 * Work submitted on this process is run at once (`runLocal`, or `wake`), other work is found by
 * polling every `pollMs`.
 */
export class GenerationWorker {
  readonly owner: string;
  /**
   * The runs this process holds, whose leases one timer renews (500 rows a statement) every third of
   * a lease. A row the renewal no longer finds held was taken over or settled elsewhere: its run is
   * aborted as lost; one with a cancel request is aborted as canceled.
   */
  private readonly local: RenewedSet<string, AbortLink>;
  private readonly background = new Set<Promise<unknown>>();
  private readonly settleWaiters = new Map<string, Set<() => void>>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly deps: GenerationWorkerDeps) {
    this.owner = deps.owner ?? newLeaseOwner();
    this.local = new RenewedSet<string, AbortLink>(
      Math.floor(this.deps.leaseMs / 3),
      async (batch) => {
        const renewed = await renewGenerationLeases(
          this.deps.db,
          batch.map(([id]) => id),
          this.owner,
          this.deps.leaseMs,
        );
        for (const [id, run] of batch) {
          // Ended meanwhile (its settlement is why the renewal no longer found it running).
          if (this.local.get(id) !== run) continue;
          const lease = renewed.get(id);
          if (!lease) run.abort(new LeaseLost(id, false));
          else if (lease.cancelRequested) run.abort(new LeaseLost(id, true));
        }
      },
      (error, generations) => this.deps.logger.warn({ err: error, generations }, 'could not renew generation leases'),
    );
  }

  /** Starts polling; resolves after the first look for work (queued, or left by a dead process). */
  async start(): Promise<void> {
    this.timer = setInterval(() => this.wake(), this.deps.pollMs);
    this.timer.unref();
    this.wake();
    await this.ticking;
  }

  /** Look for work now (work was queued on this process, or a run ended and freed room). */
  wake(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = this.tick()
      .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'generation worker could not claim work'))
      .finally(() => {
        this.ticking = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async tick(): Promise<void> {
    const { db, clock, leaseMs } = this.deps;
    while (!this.stopped && this.background.size < this.deps.maxRunning) {
      const models = await claimableModels(db);
      if (models.length === 0) return;
      const roomy = await this.deps.modelsWithRoom(models);
      const row = await claimNextGeneration(db, this.owner, roomy, clock.now(), leaseMs);
      if (!row) return;
      // Its lease lapsed while this process still runs it (the event loop stalled past the lease):
      // the claim renewed it, one run is enough.
      if (this.local.has(row.id)) continue;
      this.runInBackground(row);
    }
  }

  private runInBackground(row: GenerationsTable): void {
    const run: Promise<unknown> = this.hold(row, undefined)
      .catch((error: unknown) => {
        if (error instanceof RunDeferred) {
          this.deps.logger.warn(
            { generation_id: row.id, err: error.cause, retry_after_ms: this.deps.leaseMs },
            'background generation deferred: a dependency is unavailable',
          );
        } else if (!(error instanceof LeaseLost)) {
          this.deps.logger.info({ generation_id: row.id, err: error }, 'background generation ended in failure');
        }
      })
      .finally(() => {
        this.background.delete(run);
        this.wake();
      });
    this.background.add(run);
  }

  /**
   * Runs a generation this process inserted already claimed (the synchronous path), for a client
   * waiting on it; `signal` is the client's (a disconnect aborts the run, which fails and releases it).
   */
  holdLocal<T>(row: GenerationsTable, signal: AbortSignal, execute: (row: GenerationsTable, signal: AbortSignal) => Promise<T>): Promise<T> {
    return this.hold(row, signal, execute);
  }

  /** Claims a queued generation by id and runs it in the background (work queued on this process). */
  async claimLocal(id: string): Promise<boolean> {
    const row = await claimQueuedGeneration(this.deps.db, id, this.owner, this.deps.clock.now(), this.deps.leaseMs);
    if (row) this.runInBackground(row);
    return row !== undefined;
  }

  /** Aborts the local run of `id` (cancel); true when this process was running it. */
  abortLocal(id: string): boolean {
    const run = this.local.get(id);
    run?.abort(new LeaseLost(id, true));
    return run !== undefined;
  }

  /** Runs a claimed row while renewing its lease; a lost lease or a cancel aborts the run, as does `signal` (its client's). */
  private async hold<T>(
    row: GenerationsTable,
    signal: AbortSignal | undefined,
    execute?: (row: GenerationsTable, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    // The run's link of the abort chain: the lease's end (LeaseLost) or the client's, whichever comes first.
    const run = new AbortLink(signal);
    this.local.add(row.id, run);
    try {
      return (await (execute ?? this.deps.execute)(row, run.signal)) as T;
    } finally {
      run.release();
      this.local.delete(row.id);
      const waiters = this.settleWaiters.get(row.id);
      this.settleWaiters.delete(row.id);
      for (const wake of waiters ?? []) wake();
    }
  }

  /** Resolves when a run of `id` on this process ends, or after `ms` (it may run on another replica). */
  settledOrTimeout(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.settleWaiters.get(id) ?? new Set<() => void>();
      const done = () => {
        clearTimeout(timer);
        waiters.delete(done);
        if (waiters.size === 0 && this.settleWaiters.get(id) === waiters) this.settleWaiters.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waiters.add(done);
      this.settleWaiters.set(id, waiters);
    });
  }

  /** Stops claiming; background runs finish (bounded by their provider deadline). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    await Promise.allSettled([...this.background]);
  }
}

/**
 * Room for `model` on its channels, or, when none of them is usable at all, on the first fallback of
 * its chain that is not down as well (a run fails over to it: src/channels/model-fallbacks.ts); a model
 * that is merely full keeps its work queued. A model the catalog no longer has is let through (its
 * run fails and releases it).
 */
export async function modelHasRoom(
  channels: { roomFor(entry: CatalogModel): Promise<ModelRoom> },
  catalog: ReadonlyMap<string, CatalogModel>,
  model: string,
): Promise<boolean> {
  const entry = catalog.get(model);
  if (entry === undefined) return true;
  for (const candidate of [entry, ...fallbackChain(entry, catalog)]) {
    const room = await channels.roomFor(candidate);
    if (room !== 'down') return room === 'room';
  }
  return false;
}
