import type { Kysely, Transaction } from 'kysely';
import type { CatalogModel } from '../config/catalog';
import type { Database, GenerationsTable } from '../db/schema';
import { mayHaveCommitted } from '../db/bounded-pool';
import { databaseBatchOptions, StatementBatcher } from '../db/statement-batcher';
import { capabilitiesOf } from '../db/storage-capabilities';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import { isDatabaseOutage, withChargeOutcome } from '../errors/dependency-errors';
import type { ModerationColumns } from '../guardrails/project-moderation';
import { type ClientKey, creditsUsedNow } from '../keys/key.model';
import { findKeyById, releaseCredits, type Reservation, reserveCredits } from '../keys/keys.repository';
import { keyRefused } from '../keys/rules/key-refusal';
import { keyRefusal } from '../keys/rules/key-usability';
import { currentPeriodStart, periodEnd } from '../keys/rules/quota-period';
import { type Clock, toIso } from '../shared/clock';
import { newSortableId } from '../shared/ids';
import { emitQuotaEvents, emitQuotaExhausted, keyQuotaBook, projectQuotaBook } from '../events/key-events';
import { projectDisabled } from '../projects/project-policy';
import { projectUsageNow } from '../projects/project.model';
import { findProjectById, recordProjectReservation, reserveProjectCredits } from '../projects/projects.repository';
import { reservedCredits } from './charges';
import type { StoredGenerationRequest } from './durable';
import { insertGeneration } from './generations.repository';
import { type ReservationRequest, reserveWithGeneration, reserveWithGenerations } from './reservations.repository';

/** The generation row of a reservation, given the period and usage epoch the key's book was charged in. */
type GenerationOf = (row: Pick<GenerationsTable, 'period_started_at' | 'usage_epoch'>) => GenerationsTable;

export interface ReservationsDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  /** The lease owner of this process's runs (its worker's): a held row is inserted claimed by it. */
  owner: string;
  leaseMs: number;
  /** A reservation whose outcome the database left unknown: released once it takes writes (generation-runner.ts). */
  onUnsettled?: (generationId: string, errorCode: string, mayAppear?: boolean) => void;
  /** PostgreSQL: the longest one database operation may take; a batched statement's queue counts in it. */
  databaseBudgetMs?: number;
}

/**
 * A key's credits and its generation row, taken together: a row exists only with its credits
 * reserved, and a refusal says why (quota, key state) as the key is now.
 */
export class Reservations {
  /** PostgreSQL: the one-statement reservation (reserveWithGeneration), batched over distinct keys. */
  private readonly reserveInOneStatement: ((request: ReservationRequest) => Promise<Reservation | undefined>) | undefined;

  constructor(private readonly deps: ReservationsDeps) {
    if (capabilitiesOf(deps.db).oneStatementWrites) {
      const reservations = new StatementBatcher<ReservationRequest, Reservation | undefined>(
        (requests) => deps.writes.admitSingle((db) => reserveWithGenerations(db, requests)),
        (request) => deps.writes.admitSingle((db) => reserveWithGeneration(db, request.reservation, request.row)),
        // A key is in one batch in flight at most, so this process's lanes never wait on each other's key rows.
        { maxBatch: 100, lanes: 3, conflictKey: (request) => request.reservation.keyId, ...databaseBatchOptions(deps.databaseBudgetMs) },
      );
      this.reserveInOneStatement = (request) => reservations.submit(request);
    }
  }

  /**
   * The columns of a row this process runs at once (the synchronous path): inserted already
   * claimed by the local worker, so no other worker can take it while its lease is renewed.
   */
  private heldRow(
    now: number,
  ): Pick<
    GenerationsTable,
    'status' | 'error_code' | 'error_message' | 'latency_ms' | 'completed_at' | 'lease_owner' | 'lease_expires_at' | 'started_at' | 'cancel_requested' | 'runs'
  > {
    return {
      status: 'running',
      error_code: null,
      error_message: null,
      latency_ms: null,
      completed_at: null,
      lease_owner: this.deps.owner,
      // Wall-clock, like every lease (durable.repository.ts).
      lease_expires_at: Date.now() + this.deps.leaseMs,
      started_at: now,
      cancel_requested: 0,
      runs: 1,
    };
  }

  /** An internal service's generation, held by this process: recorded at what a key would reserve (charges.ts), charged to no key. */
  async record(clientId: string, entry: CatalogModel, n: number, stored: StoredGenerationRequest, generationId: string): Promise<GenerationsTable> {
    const now = this.deps.clock.now();
    const row: GenerationsTable = {
      ...this.heldRow(now),
      id: generationId,
      key_id: null,
      client_id: clientId,
      model: entry.model,
      provider: entry.provider,
      images: n,
      credits: reservedCredits(stored),
      period_started_at: now,
      created_at: now,
      usage_epoch: null,
      request: JSON.stringify(stored),
    };
    await this.deps.writes.admit((trx) => insertGeneration(trx, row));
    return row;
  }

  /** `generationId`: chosen by the caller when something (its stored input images) already names it. */
  async reserve(
    key: ClientKey,
    entry: CatalogModel,
    n: number,
    stored: StoredGenerationRequest,
    held = true,
    generationId = newSortableId('gen', this.deps.clock.now()),
    /** What the key's project's moderation hook answered: recorded with the project's book on the row. */
    moderation?: ModerationColumns,
  ) {
    const { writes, clock } = this.deps;
    const now = clock.now();
    // The highest price of the request's chain: a fallback may deliver (charges.ts).
    const cost = reservedCredits(stored);
    const request = JSON.stringify(stored);
    const reservationFailed = (error: unknown): unknown => this.failed(error, generationId, held);
    const generationOf: GenerationOf = (row) => ({
      ...(held ? this.heldRow(now) : QUEUED_ROW),
      id: generationId,
      key_id: key.id,
      client_id: null,
      model: entry.model,
      provider: entry.provider,
      images: n,
      credits: cost,
      period_started_at: row.period_started_at,
      created_at: now,
      usage_epoch: row.usage_epoch,
      request,
    });
    if (this.reserveInOneStatement && key.project === null) {
      const alone = await this.reserveAlone(key, cost, now, generationOf).catch((error: unknown) => {
        throw reservationFailed(error);
      });
      if (alone) return alone;
    }
    const reserved = await writes
      .admit((trx) => this.reserveBooks(trx, key, cost, now, generationOf, moderation))
      .catch((error: unknown) => {
        throw reservationFailed(error);
      });
    if ('refusedBy' in reserved) {
      if (reserved.refusedBy === 'project') throw await this.projectRefusal(reserved.projectId, cost, now);
      throw await this.refusal(key, cost, now);
    }
    return { row: reserved.generation, cost, creditsRemaining: reserved.creditsRemaining };
  }

  /**
   * PostgreSQL: one statement when the reservation writes no event (crosses no threshold, leaves credits)
   * and moves one book: a key in a project takes the general path (the statement refuses a key whose row
   * has one). Undefined when the statement did not reserve: the general path then decides, and words a refusal.
   */
  private async reserveAlone(key: ClientKey, cost: number, now: number, generationOf: GenerationOf) {
    const draft = generationOf({ period_started_at: now, usage_epoch: null });
    const row = await this.reserveInOneStatement!({
      reservation: { keyId: key.id, keyHash: key.keyHash, cost, now, alertThresholds: key.policy.alertThresholds },
      row: draft,
    });
    if (!row) return undefined;
    return {
      row: { ...draft, period_started_at: row.period_started_at, usage_epoch: row.usage_epoch },
      cost,
      creditsRemaining: row.credits_quota - row.credits_used,
    };
  }

  /**
   * The general path, in one write transaction: the reservation and its generation row commit together, so
   * an active row always has credits behind it. The period and book charged come from the key's row as the
   * reservation found it, not from `key`; so does its project, whose book is reserved after the key's row
   * (one lock order).
   */
  private async reserveBooks(
    trx: Transaction<Database>,
    key: ClientKey,
    cost: number,
    now: number,
    generationOf: GenerationOf,
    moderation?: ModerationColumns,
  ) {
    const row = await reserveCredits(trx, key, cost, now);
    if (!row) return { refusedBy: 'key' as const };
    const projectId = row.project_id ?? null;
    const projectBook = projectId === null ? undefined : await reserveProjectCredits(trx, projectId, cost, now);
    if (projectId !== null && !projectBook) {
      // Neither book moves: the key's reservation is given back in the same transaction.
      await releaseCredits(trx, key.id, cost, row.usage_epoch);
      return { refusedBy: 'project' as const, projectId };
    }
    // Threshold events commit with the reservation that crosses them, once per key, threshold and period.
    await emitQuotaEvents(trx, keyQuotaBook(key), { used: row.credits_used, quota: row.credits_quota, cost, periodStart: row.period_started_at }, now);
    if (projectId !== null && projectBook) {
      const book = { used: projectBook.credits_used, quota: projectBook.credits_quota, cost, periodStart: projectBook.period_started_at };
      await emitQuotaEvents(trx, projectQuotaBook(projectId), book, now);
    }
    const generation = generationOf(row);
    await insertGeneration(trx, generation);
    // What the key can still spend: the smaller of its own book and its project's.
    const creditsRemaining = Math.min(row.credits_quota - row.credits_used, projectBook ? projectBook.credits_quota - projectBook.credits_used : Infinity);
    if (projectId === null || !projectBook) return { key: row, generation, creditsRemaining };
    await recordProjectReservation(trx, generation.id, projectId, projectBook.usage_epoch, moderation);
    // The row as stored: its resource names the project (and the project's policy on its prompt), and
    // what the moderation hook decided (a queued generation's first answer, 202, shows it).
    return { key: row, creditsRemaining, generation: { ...generation, project_id: projectId, project_usage_epoch: projectBook.usage_epoch, ...moderation } };
  }

  /** Why the key's project refused a reservation, as the project is now: disabled, else its quota is spent. */
  private async projectRefusal(projectId: string, cost: number, now: number): Promise<ApiError> {
    const project = await findProjectById(this.deps.db, projectId);
    if (!project || project.status !== 'active') return projectDisabled(projectId);
    const { used, periodStart } = projectUsageNow(project, now);
    await this.deps.writes.run((trx) => emitQuotaExhausted(trx, projectQuotaBook(projectId), { used: null, quota: project.credits_quota, periodStart }, now));
    const resetsAt = toIso(periodEnd(periodStart, project.quota_period_days));
    return new ApiError(
      'project_quota_exceeded',
      `This request needs ${credits(cost)}; project ${projectId} has ${Math.max(0, project.credits_quota - used)} of its ${project.credits_quota} left this period, which ends at ${resetsAt}.`,
      { details: { period_resets_at: resetsAt } },
    );
  }

  /** A reservation the database did not answer: it may still commit, and the error says what that would cost. */
  private failed(error: unknown, generationId: string, held: boolean): unknown {
    if (!isDatabaseOutage(error) || !mayHaveCommitted(error)) return error;
    // Queued (async), a late reservation would be run by a worker: what it costs is unknown until looked up.
    if (!held) return withChargeOutcome(error, { kind: 'unknown', generationId });
    // Held, it lapses with a lease nothing renews: released, never run, by the retries below (or a takeover or the sweeper).
    this.deps.onUnsettled?.(generationId, 'dependency_unavailable', true);
    return withChargeOutcome(error, { kind: 'reservation', generationId, releasedWithinSeconds: Math.ceil(this.deps.leaseMs / 1000) });
  }

  /** Why a reservation was refused: the key as it is now says (the request's copy may predate an admin change), else its quota is spent. */
  private async refusal(key: ClientKey, cost: number, now: number): Promise<ApiError> {
    const current = await findKeyById(this.deps.db, key.id);
    if (!current) return keyRefused('unknown');
    const refusal = keyRefusal(current, key.keyHash, now);
    if (refusal) return keyRefused(refusal, current);
    const periodStart = currentPeriodStart(current.created_at, current.quota_period_days, now);
    await this.deps.writes.run((trx) => emitQuotaExhausted(trx, keyQuotaBook(key), { used: null, quota: current.credits_quota, periodStart }, now));
    const resetsAt = toIso(periodEnd(periodStart, current.quota_period_days));
    return new ApiError(
      'quota_exceeded',
      `This request needs ${credits(cost)}; the key has ${Math.max(0, current.credits_quota - creditsUsedNow(current, now).used)} of its ${current.credits_quota} left this period, which ends at ${resetsAt}.`,
      { details: { period_resets_at: resetsAt } },
    );
  }
}

const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'}`;

/** A generation waiting for a worker: no lease, not started. */
const QUEUED_ROW = {
  status: 'queued',
  error_code: null,
  error_message: null,
  latency_ms: null,
  completed_at: null,
  lease_owner: null,
  lease_expires_at: null,
  started_at: null,
  cancel_requested: 0,
  runs: 0,
} as const;
