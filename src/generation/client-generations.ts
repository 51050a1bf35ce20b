import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import type { Database, GenerationsTable } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import type { Clock } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { onModel, type StoredGenerationRequest } from './durable';
import type { ClientGeneration, GenerationResources } from './generation-resource';
import type { GenerationWorker } from './generation-worker';
import { creditsOf, heldFor, imagesSentAtCancel } from './charges';
import { markedCallIndexes } from './durable.repository';
import { findGeneration, listGenerations } from './generations.repository';
import { cancelGeneration } from './settlement.repository';

type Schemas = components['schemas'];

export interface ClientGenerationsDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  /** Signs and opens the list's page cursors. */
  cursors: CursorCodec;
  resources: GenerationResources;
  worker: GenerationWorker;
  /** Completion webhooks: queues the delivery of a settlement in its transaction (true when queued). */
  onSettled?: (trx: Kysely<Database>, id: string) => Promise<boolean>;
  afterSettled?: () => void;
}

const FINISHED = new Set(['succeeded', 'failed', 'canceled']);

/**
 * Generations as the key holder sees them (GET /generations, GET /generations/{id}, cancel): only
 * the creating key's (generation-resource.ts shapes each).
 */
export class ClientGenerations {
  constructor(private readonly deps: ClientGenerationsDeps) {}

  /** The key's generation, or 404 (also for another key's: its existence is not revealed). */
  async find(keyId: string, id: string): Promise<GenerationsTable> {
    const row = await findGeneration(this.deps.db, id);
    if (!row || row.key_id !== keyId) throw new ApiError('generation_not_found', `No generation ${id}.`, { param: 'id' });
    return row;
  }

  async get(keyId: string, id: string): Promise<ClientGeneration> {
    return this.deps.resources.resource(await this.find(keyId, id));
  }

  async list(keyId: string, query: { status?: string; limit?: number; cursor?: string }): Promise<Schemas['ClientGenerationList']> {
    const limit = query.limit ?? 20;
    const rows = await listGenerations(this.deps.db, {
      keyId,
      status: query.status,
      limit,
      after: query.cursor === undefined ? undefined : this.deps.cursors.position(query.cursor, 'gen'),
    });
    const { page, nextCursor } = this.deps.cursors.pageOf(rows, limit, 'gen');
    return { data: await this.deps.resources.resources(page), next_cursor: nextCursor };
  }

  /**
   * Queued or running: canceled now in one transaction, by the same kind of conditional update every
   * settlement uses, so it wins or loses against a finishing run exactly once, on any replica. The key
   * keeps the credits of the upstream calls already sent and gets the rest back (charges.ts); a run
   * that finishes after the cancel delivers nothing. The holder finds the row settled at its next
   * lease renewal (its next upstream call is refused before that); on this process it stops at once.
   */
  async cancel(keyId: string, id: string): Promise<ClientGeneration> {
    const row = await this.cancelRow(await this.find(keyId, id), { by: 'the key holder' });
    return this.deps.resources.resource(row);
  }

  /**
   * The one cancel path, the key holder's and an administrator's (admin-generations.ts): `by` names
   * who canceled in the row's error message; `onCanceled` runs in the cancel's transaction when it
   * wins (an administrator's audit event). 409 when the row had already settled. Returns the row after.
   */
  async cancelRow(
    row: GenerationsTable,
    options: { by: string; onCanceled?: (trx: Kysely<Database>, canceled: { from: 'queued' | 'running'; chargedCredits: number }) => Promise<void> },
  ): Promise<GenerationsTable> {
    const { writes, clock } = this.deps;
    const id = row.id;
    const stored = row.request === null ? undefined : (JSON.parse(row.request) as StoredGenerationRequest);
    const canceled = await writes.run(async (trx) => {
      const errorMessage = (charged: number) =>
        `Canceled by ${options.by}; ${charged > 0 ? `${charged} credits were charged for the upstream calls already sent` : 'its credits were released'}.`;
      let canceledFrom: 'queued' | 'running' = 'queued';
      const settled = await cancelGeneration(trx, row, { errorMessage, completedAt: clock.now() }, async (from) => {
        canceledFrom = from;
        if (!stored) return 0;
        // The model it runs on, read under the cancel's lock: a fallback may have moved it since `row` was read.
        const stage = stored.fallbacks === undefined ? stored : onModel(stored, (await findGeneration(trx, id))?.model ?? row.model);
        return creditsOf(imagesSentAtCancel(stage, from, from === 'running' ? await markedCallIndexes(trx, id) : []), heldFor(stage, row));
      });
      if (settled) await options.onCanceled?.(trx, { from: canceledFrom, chargedCredits: settled.chargedCredits });
      if (settled && (await this.deps.onSettled?.(trx, id))) return 'hooked';
      return settled !== undefined;
    });
    if (canceled === 'hooked') this.deps.afterSettled?.();
    const after = await findGeneration(this.deps.db, id);
    if (!after) throw new ApiError('generation_not_found', `No generation ${id}.`, { param: 'id' });
    if (!canceled) throw new ApiError('generation_finished', `Generation ${id} already ${after.status}; it cannot be canceled.`, { param: 'id' });
    this.deps.worker.abortLocal(id);
    return after;
  }

  /** Resolves when the generation settled or `ms` passed: an in-process wake-up, else a poll of the row. */
  async waitForSettled(id: string, ms: number): Promise<GenerationsTable | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const row = await findGeneration(this.deps.db, id);
      if (!row || FINISHED.has(row.status)) return row;
      const left = deadline - Date.now();
      if (left <= 0) return row;
      await this.deps.worker.settledOrTimeout(id, Math.min(left, 250));
    }
  }
}
