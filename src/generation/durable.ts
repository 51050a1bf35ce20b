import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { TaskJournal } from '../channels/channel-router';
import type { CatalogModel } from '../config/catalog';
import type { Database, GenerationTasksTable, GenerationsTable } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import type { StoredInputs } from '../images/inputs/input-images';
import { callsOfEntry, sendsNothingUpstream } from '../providers/formats';
import type { ProviderRequest } from '../providers/provider';
import type { Clock } from '../shared/clock';
import type { GenerationWebhook } from './completion-webhooks';
import { forgetTask, recordTaskAccepted, recordTaskSending, runState } from './durable.repository';
import { LeaseLost } from './lease';

/** generations.request: everything a worker on any replica needs to run the generation. */
export interface StoredGenerationRequest {
  /** The catalog entry as it was at submission (the internal API may address models the catalog lacks). */
  entry: CatalogModel;
  request: Omit<ProviderRequest, 'resumeTaskId' | 'onTaskAccepted' | 'inputImages' | 'mask'>;
  /** The request's input images, by id in the image store: each run reads the same bytes back (input-images.ts). */
  inputs?: StoredInputs;
  /** Keep b64_json images in the store too: the result is read later, not handed over in this response. */
  keep_base64: boolean;
  /**
   * Mark every upstream call before sending it (one write per call), so a takeover knows what was
   * not sent and may send it. Background runs do; the synchronous path does not (its client is
   * gone with its process): a takeover of it resumes accepted visual tasks and abandons the rest.
   */
  mark_sends: boolean;
  /** The request's completion webhook (completion-webhooks.ts), when it asked for one. */
  webhook?: GenerationWebhook;
  /**
   * The models it may continue on, in order, when every channel of the one before fails on the
   * provider's side (fallback-chain.ts chose them for this request and key; src/channels/model-fallbacks.ts
   * runs them), as the catalog had them at submission. Absent without any.
   */
  fallbacks?: CatalogModel[];
  /**
   * The request that created it: its id (the failure log line names it, whichever process runs it)
   * and its trace context when traced (a background run's span links to it).
   */
  origin?: { request_id: string; traceparent?: string };
}

/** The request fields a catalog model decides: what its upstream is asked for. */
export function upstreamFieldsOf(
  entry: CatalogModel,
): Pick<StoredGenerationRequest['request'], 'upstreamModel' | 'upstreamFamily' | 'transport' | 'upstreamOptions'> {
  return {
    upstreamModel: entry.upstream_model,
    ...(entry.upstream_family === undefined ? {} : { upstreamFamily: entry.upstream_family }),
    ...(entry.transport !== undefined ? { transport: entry.transport } : {}),
    ...(entry.upstream_options !== undefined ? { upstreamOptions: entry.upstream_options } : {}),
  };
}

/** The models a generation may run on, in order: the requested one, then its fallbacks. */
export function chainOf(stored: StoredGenerationRequest): CatalogModel[] {
  return [stored.entry, ...(stored.fallbacks ?? [])];
}

/**
 * The stored request as it runs on `model` of its chain: that model's entry and upstream fields, the
 * rest as asked (what its calls, charges and losses are counted by). The requested model (or one the
 * chain lacks) gives the stored request itself.
 */
export function onModel(stored: StoredGenerationRequest, model: string): StoredGenerationRequest {
  const entry = stored.fallbacks?.find((candidate) => candidate.model === model);
  if (!entry || model === stored.entry.model) return stored;
  const { upstreamModel: _model, upstreamFamily: _family, transport: _transport, upstreamOptions: _options, ...asked } = stored.request;
  return { ...stored, entry, request: { ...asked, ...upstreamFieldsOf(entry) } };
}

/** The request a generation row stores, for the worker that runs it (on any replica). */
export function storedRequestOf(row: Pick<GenerationsTable, 'id' | 'request'>): StoredGenerationRequest {
  if (row.request === null) throw new Error(`generation ${row.id} has no stored request`);
  return JSON.parse(row.request) as StoredGenerationRequest;
}

/** Upstream calls a generation makes: its format's rule (formats.ts callsOfEntry), as the failover splits it. */
export function callsOf(stored: StoredGenerationRequest): number {
  return callsOfEntry(stored.entry, stored.request.n);
}

/**
 * The generation_tasks rows of one generation, as the channel router's journal: a mark before a
 * call is sent, the task id once the upstream accepted it (before polling), the mark dropped when
 * the call provably reached nothing. Built with the rows a takeover found, to resume their tasks.
 */
export class GenerationTaskJournal implements TaskJournal {
  private readonly resumable = new Map<number, { channelId: string; taskId: string; acceptedAt: number }>();
  /** Image indexes of the calls this run sent, or found sent by its predecessor: what a disconnect charges. */
  readonly sent = new Set<number>();
  /**
   * Image indexes of accepted tasks a takeover found older than their upstream keeps a task
   * (`lifeMs`, counted from when the call was sent): not resumable, the generation fails instead.
   */
  readonly expired: number[] = [];

  constructor(
    private readonly db: Kysely<Database>,
    private readonly writes: WriteTransactions,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly generationId: string,
    found: GenerationTasksTable[],
    private readonly markSends: boolean,
    /** This run's lease owner: a mark is refused once another holds the generation, or none does. */
    private readonly owner: string,
    /** How long the upstream keeps an accepted task (descriptor `resume.lifeMs`); undefined when it does not say. */
    lifeMs?: number,
  ) {
    const now = clock.now();
    for (const task of found) {
      if (task.task_id === null) continue;
      const imageIndex = Number(task.image_index);
      const acceptedAt = Number(task.sent_at);
      this.sent.add(imageIndex);
      if (lifeMs !== undefined && now - acceptedAt >= lifeMs) this.expired.push(imageIndex);
      else this.resumable.set(imageIndex, { channelId: task.channel_id, taskId: task.task_id, acceptedAt });
    }
  }

  /**
   * The generation moved on to the next model of its chain (recordFallback dropped the rows): the
   * previous model's calls ended, so none is resumed, and what a disconnect charges starts afresh.
   */
  restart(): void {
    this.resumable.clear();
    this.sent.clear();
    this.expired.length = 0;
  }

  resume(imageIndex: number): { channelId: string; taskId: string; acceptedAt: number } | undefined {
    return this.resumable.get(imageIndex);
  }

  async sending(imageIndex: number, channelId: string): Promise<void> {
    if (this.markSends) {
      const marked = await this.writes.run((trx) =>
        recordTaskSending(
          trx,
          { generation_id: this.generationId, image_index: imageIndex, channel_id: channelId, task_id: null, sent_at: this.clock.now() },
          this.owner,
        ),
      );
      // Canceled or taken over since the run began: the call is not sent (a cancel charged only the marked ones).
      if (!marked) throw new LeaseLost(this.generationId, false);
    } else {
      // A run that does not mark its sends hears of a cancel on another replica only at its next lease
      // renewal: the row is read instead, so no call starts once a cancel committed (a retry after a
      // busy answer, a call that waited for its channel). The cancel charged every image; the run gives
      // back the calls it never sent (generation-runner.ts).
      const state = await runState(this.db, this.generationId, this.owner);
      if (state !== 'held') throw new LeaseLost(this.generationId, state === 'canceled');
    }
    this.sent.add(imageIndex);
  }

  async accepted(imageIndex: number, channelId: string, taskId: string): Promise<void> {
    try {
      await this.writes.run((trx) =>
        recordTaskAccepted(trx, {
          generation_id: this.generationId,
          image_index: imageIndex,
          channel_id: channelId,
          task_id: taskId,
          sent_at: this.clock.now(),
        }),
      );
    } catch (error) {
      // The task runs upstream anyway: polled by this process; a takeover finds only the mark and
      // fails the generation rather than submit it again.
      this.logger.error({ err: error, generation_id: this.generationId, channel_id: channelId, task_id: taskId }, 'could not record an accepted upstream task');
    }
  }

  async unsent(imageIndex: number): Promise<void> {
    this.sent.delete(imageIndex);
    if (!this.markSends) return;
    await this.writes.run((trx) => forgetTask(trx, this.generationId, imageIndex));
  }
}

/**
 * Whether a takeover finds an upstream call it can neither resume nor safely send again: one
 * marked sent without a task id, or (runs that do not mark their sends) any call without a task
 * id, since it may have been sent. The local provider sends nothing upstream.
 */
export function interrupted(stored: StoredGenerationRequest, tasks: GenerationTasksTable[]): boolean {
  return !sendsNothingUpstream(stored.entry) && unacknowledgedCalls(stored, tasks).length > 0;
}

/** The calls a predecessor marked sent but never saw accepted: neither resumable nor safe to send again. */
export function unacknowledgedCalls(stored: StoredGenerationRequest, tasks: GenerationTasksTable[]): number[] {
  const byIndex = new Map(tasks.map((task) => [task.image_index, task]));
  return Array.from({ length: callsOf(stored) }, (_, i) => i).filter((i) => {
    const task = byIndex.get(i);
    return stored.mark_sends ? task !== undefined && task.task_id === null : task?.task_id == null;
  });
}
