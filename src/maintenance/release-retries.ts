import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema';
import { findGeneration } from '../generation/generations.repository';
import type { Unbilled } from '../generation/settlement.repository';
import type { Clock } from '../shared/clock';
import { releasePendingGeneration } from './sweeper';

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 1000;
/** How often a reservation that may still commit is looked for once the database answers. */
const ABSENT_LOOKUPS = 4;
/** Past this many waiting releases (a long outage), the rest wait for the sweeper. */
const MAX_WAITING = 10_000;

/**
 * A failed generation whose release failed too (the database was down, full or read-only) keeps
 * its credits reserved. Rather than wait for the sweeper (minutes: the provider's deadline plus
 * grace), the release is retried with backoff and goes through as soon as the database takes
 * writes again. Claiming the row first makes a retry that races the sweeper release once.
 */
export class ReleaseRetries {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Retries stop after this long; the sweeper has the row from then on. */
    private readonly giveUpAfterMs: number,
  ) {}

  /**
   * `mayAppear`: the generation's reservation was sent to a database that did not answer; it may
   * commit after the database is back, so a row not found yet is looked for a few times more (a
   * hung server runs what it had received as soon as it resumes, before later connections' work).
   * `unbilled`: what the upstream made for the failed run, booked as the operator's loss with the release.
   */
  retry(generationId: string, errorCode: string, mayAppear = false, unbilled?: Unbilled): void {
    if (this.timers.has(generationId) || this.timers.size >= MAX_WAITING) return;
    const started = Date.now();
    let lookupsLeft = mayAppear ? ABSENT_LOOKUPS : 1;
    const attempt = async (delay: number): Promise<void> => {
      try {
        const generation = await findGeneration(this.db, generationId);
        if (
          (generation?.status === 'queued' || generation?.status === 'running') &&
          (await releasePendingGeneration(this.db, generation, errorCode, this.clock.now(), undefined, unbilled))
        ) {
          this.logger.info({ generation_id: generationId }, 'released the credits of a generation that could not be settled');
        }
        lookupsLeft -= 1;
        if (generation === undefined && lookupsLeft > 0) {
          this.schedule(generationId, attempt, MAX_DELAY_MS);
          return;
        }
        this.timers.delete(generationId);
      } catch {
        if (!this.timers.has(generationId) || Date.now() - started + delay > this.giveUpAfterMs) {
          this.timers.delete(generationId);
          return;
        }
        this.schedule(generationId, attempt, Math.min(delay * 2, MAX_DELAY_MS));
      }
    };
    this.schedule(generationId, attempt, FIRST_DELAY_MS);
  }

  private schedule(generationId: string, attempt: (delay: number) => Promise<void>, delay: number): void {
    const timer = setTimeout(() => void attempt(delay), delay);
    timer.unref();
    this.timers.set(generationId, timer);
  }

  /** Waiting releases are left to the sweeper. */
  close(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
