import type { Logger } from 'pino';
import type { CatalogModel } from '../config/catalog';
import type { GenerationAttemptsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import type { ProviderRequest } from '../providers/provider';
import { UpstreamError } from '../providers/upstream-errors';
import type { ChannelFailover, ChannelRun, TaskJournal, UpstreamLosses } from './channel-failover';

/** One model of a generation's chain, with the request as that model's upstream takes it. */
export interface ModelStage {
  entry: CatalogModel;
  request: ProviderRequest;
}

/** A generation's run over its chain: the last model's run (`entry`: the one that delivered, or whose failure ended it), with every model's attempts and losses. */
export type ChainRun = ChannelRun & { entry: CatalogModel };

/**
 * Whether a failed run of one model may continue on the next model of its chain: nothing of it was
 * delivered, and its failure was the provider's side, found on every channel of the model: no channel
 * serves it or all are down (`provider_unavailable`, circuits open), busy past the wait line, a
 * timeout, or a refusal that proves nothing was accepted (an account problem, the channel's
 * configuration, a documented transient refusal, an upstream never reached). Never after a refusal
 * of the client's content or images, an invalid request, an answer after which the upstream may have
 * accepted the call (other than a timeout), a cancel or a disconnect, or the gateway's own outage.
 */
export function fallsBack(run: ChannelRun, signal: AbortSignal): boolean {
  if (run.ok || signal.aborted) return false;
  if (run.attempts.some((attempt) => attempt.outcome === 'succeeded')) return false;
  const { error } = run;
  if (!(error instanceof ApiError)) return false;
  if (error.code === 'provider_unavailable' || error.code === 'provider_busy' || error.code === 'provider_timeout') return true;
  return error instanceof UpstreamError && error.code === 'provider_error' && error.traits.safeElsewhere === true;
}

/**
 * Model fallbacks (issue #36 §5), their one owner: a generation runs on its model's channels
 * (channel-failover.ts), and when that run fails on the provider's side (fallsBack), continues on
 * the next model of the chain its request was given (src/generation/fallback-chain.ts), each with
 * its own provider deadline. Every attempt row names the model it was for, numbered across the chain.
 */
export class ModelFallbacks {
  constructor(
    private readonly failover: ChannelFailover,
    private readonly logger: Logger,
  ) {}

  /**
   * Runs `stages` in order until one delivers or must not be followed. `onFallback` is told before
   * the next model's first call (the generation records the move; a throw ends the run with that
   * error, e.g. the generation was canceled meanwhile).
   */
  async generate(
    generationId: string,
    stages: readonly ModelStage[],
    signal: AbortSignal,
    journal: TaskJournal | undefined,
    onFallback: (next: CatalogModel) => Promise<void>,
  ): Promise<ChainRun> {
    const attempts: GenerationAttemptsTable[] = [];
    const losses: UpstreamLosses = { billedUndelivered: 0, expiredCalls: [] };
    const withModel = (run: ChannelRun, entry: CatalogModel): void => {
      for (const attempt of run.attempts) attempts.push({ ...attempt, seq: attempts.length, model: entry.model });
      losses.billedUndelivered += run.losses.billedUndelivered;
      if (run.losses.billingReported) (losses.billingReported ??= []).push(...run.losses.billingReported);
      losses.expiredCalls.push(...run.losses.expiredCalls);
    };
    for (let index = 0; ; index += 1) {
      const stage = stages[index];
      if (stage === undefined) throw new Error(`generation ${generationId} has no model to run on`);
      const run = await this.failover.generate(generationId, stage.entry, stage.request, signal, journal);
      withModel(run, stage.entry);
      const next = stages[index + 1]?.entry;
      if (next === undefined || !fallsBack(run, signal)) return { ...run, attempts, losses, entry: stage.entry };
      this.logger.warn(
        { generation_id: generationId, model: stage.entry.model, fallback: next.model, err_code: (run as { error: ApiError }).error.code },
        'every channel of the model failed on the provider side; continuing on its fallback',
      );
      try {
        await onFallback(next);
      } catch (error) {
        return { ok: false, error, attempts, losses, entry: stage.entry };
      }
    }
  }
}
