import { creditPriceOf } from '../pricing/catalog-prices';
import { costOf, type Pixels, wholeCredits } from '../pricing/meters';
import type { UpstreamLosses } from '../channels/channel-failover';
import type { GenerationAttemptsTable } from '../db/schema';
import { sendsNothingUpstream } from '../providers/formats';
import { callsOf, chainOf, onModel, type StoredGenerationRequest } from './durable';

/**
 * What a generation that delivers nothing still costs, and what the operator loses. The rule, in one
 * place (docs/clients/async-generations.md, "What cancel, disconnect and partial failure cost"):
 * - a cancel or a disconnect keeps the credits of the images whose upstream calls were (or may have
 *   been) sent, and releases the rest: the upstream bills those calls whether or not anyone takes
 *   the images. Queued work and the `local` provider send nothing and are released in full.
 * - a failure is never charged; images the upstream made for it anyway (the other images of a
 *   request whose one image failed, images that could not be stored, calls cut by a timeout or a
 *   takeover) are the operator's loss, counted on the generation and in a metric with their reason.
 * - with model fallbacks (src/channels/model-fallbacks.ts) the reservation is `n` times the highest
 *   price of the request's chain, and every charge is at the price of the model whose calls it pays
 *   for: a success at the model that delivered, a cancel or disconnect at the model then running.
 *   The calls of the models before it are never charged: what they may have made (cut by a timeout)
 *   is the operator's loss.
 * - an accepted task older than its upstream keeps one (descriptor `resume.lifeMs`) is not polled:
 *   the generation fails, and the images of its accepted tasks are the loss (`task_expired`).
 * - images the upstream says it billed beyond those it delivered (Ark's `usage.generated_images`)
 *   are the loss too, on a succeeded generation as on a failed one (`billed_undelivered` when no
 *   other reason applies).
 * - a call that reached the upstream and ended without a usable answer (a 200 whose body is not a
 *   valid answer, a proxy's 504, a connection cut after the request was written): the failover
 *   sends to another channel only what provably reached nothing, so such a call ends the request
 *   (its attempt `failed` with `provider_error`), and the upstream may have made and billed its
 *   images: the loss (`no_usable_answer` when no other reason applies).
 * Every upstream call is therefore either charged to a key or listed as a loss, never silently dropped.
 */
export type UnbilledReason =
  'partial_failure' | 'not_stored' | 'provider_timeout' | 'no_usable_answer' | 'abandoned' | 'settled_elsewhere' | 'task_expired' | 'billed_undelivered';

/** Images one upstream call makes: one on one-image-per-call transports, else the whole request. */
function imagesPerCall(stored: StoredGenerationRequest): number {
  return callsOf(stored) === stored.request.n ? 1 : stored.request.n;
}

/** Images whose calls were sent, from the image indexes of the calls (each index counted once). */
export function imagesOfCalls(stored: StoredGenerationRequest, callIndexes: Iterable<number>): number {
  if (sendsNothingUpstream(stored.entry)) return 0;
  return new Set(callIndexes).size * imagesPerCall(stored);
}

/**
 * Images a cancel finds sent, from what the database knows when the cancel commits: nothing for
 * queued work; for a running generation that marks its sends (background runs), the calls marked;
 * one that does not (the synchronous path) counts every image as sent once it runs.
 */
export function imagesSentAtCancel(stored: StoredGenerationRequest, status: 'queued' | 'running', markedCalls: readonly number[]): number {
  if (status === 'queued' || sendsNothingUpstream(stored.entry)) return 0;
  return stored.mark_sends ? imagesOfCalls(stored, markedCalls) : stored.request.n;
}

/** The inputs a model's upstream bills by their megapixels: the request's input images (not a mask). */
function inputPixels(stage: StoredGenerationRequest): Pixels[] {
  return (stage.inputs?.images ?? []).map(({ width, height }) => ({ width, height }));
}

/**
 * The most a request can cost on the model of `stage` (src/pricing): every image it asked for at its
 * size and quality, and its input images, in whole credits.
 */
export function boundOf(stage: StoredGenerationRequest): number {
  const { n, width, height, quality } = stage.request;
  return wholeCredits(
    costOf(creditPriceOf(stage.entry), {
      images: Array.from({ length: n }, () => ({ width, height })),
      quality,
      inputImages: inputPixels(stage),
      calls: callsOf(stage),
    }),
  );
}

/** What a request reserves: the most it can cost on the dearest model it may run on. */
export function reservedCredits(stored: StoredGenerationRequest): number {
  return Math.max(...chainOf(stored).map((entry) => boundOf(onModel(stored, entry.model))));
}

/**
 * The credits a generation holds for the model it runs on (`stage`: its stored request there,
 * onModel): all it reserved, unless it has fallbacks and so reserved for the dearest of its chain;
 * then the most a request costs on this model. What creditsOf divides for a cancel, a disconnect or a success.
 */
export function heldFor(stage: StoredGenerationRequest, generation: { credits: number; images: number }): { credits: number; images: number } {
  if (stage.fallbacks === undefined || stage.fallbacks.length === 0) return generation;
  return { credits: Math.min(generation.credits, boundOf(stage)), images: generation.images };
}

/**
 * What a success costs: the measured quantities of what was delivered (at most `n` images, at their
 * own pixels; the input images; the tokens the upstream reported), priced on the delivering model,
 * never more than it holds. `overrun` is what they cost beyond that: the operator's loss.
 */
export function deliveredCharge(
  stage: StoredGenerationRequest,
  held: { credits: number },
  delivered: readonly (Pixels & { usage?: { inputTokens: number; outputTokens: number } | undefined })[],
): { credits: number; overrun: number } {
  const images = delivered.slice(0, stage.request.n);
  const reported = delivered.filter((image) => image.usage !== undefined);
  const cost = wholeCredits(
    costOf(creditPriceOf(stage.entry), {
      images: images.map(({ width, height }) => ({ width, height })),
      quality: stage.request.quality,
      inputImages: inputPixels(stage),
      ...(reported.length > 0
        ? {
            tokens: {
              input: reported.reduce((sum, image) => sum + (image.usage?.inputTokens ?? 0), 0),
              output: reported.reduce((sum, image) => sum + (image.usage?.outputTokens ?? 0), 0),
            },
          }
        : {}),
      calls: callsOf(stage),
    }),
  );
  return { credits: Math.min(cost, held.credits), overrun: Math.max(0, cost - held.credits) };
}

/** The credits of `images` of a generation that reserved `credits` for `of` images. */
export function creditsOf(images: number, generation: { credits: number; images: number }): number {
  if (generation.images <= 0) return 0;
  return Math.min(generation.credits, Math.round((generation.credits * images) / generation.images));
}

/**
 * What the upstream made (or may have made) for a run that is not charged: the images of its
 * succeeded calls and of its expired tasks, of calls cut by a timeout (the upstream may finish and
 * bill them), of calls that reached it and got no usable answer, and those it billed beyond what it delivered.
 */
export function unbilledOf(
  stored: StoredGenerationRequest,
  attempts: readonly Pick<GenerationAttemptsTable, 'image_index' | 'outcome' | 'error_code' | 'model'>[],
  notStored: boolean,
  losses: Partial<UpstreamLosses> = {},
): { images: number; reason: UnbilledReason } | undefined {
  const expired = losses.expiredCalls ?? [];
  const modelOf = (attempt: { model?: string | null | undefined }) => attempt.model ?? stored.entry.model;
  // Expired tasks are the last model's the run was on (the only one whose tasks it polls).
  const last = attempts.length > 0 ? modelOf(attempts[attempts.length - 1]!) : stored.entry.model;
  let made = 0;
  let cut = 0;
  let unusable = 0;
  let images = 0;
  // Per model of the chain (attempts without one are the requested model's): each made at most `n`.
  for (const model of new Set([...attempts.map(modelOf), ...(expired.length > 0 ? [last] : [])])) {
    const stage = onModel(stored, model);
    const own = attempts.filter((a) => modelOf(a) === model);
    const succeeded = imagesOfCalls(stage, [...own.filter((a) => a.outcome === 'succeeded').map((a) => a.image_index), ...(model === last ? expired : [])]);
    const timedOut = imagesOfCalls(
      stage,
      own.filter((a) => a.outcome !== 'succeeded' && a.error_code === 'provider_timeout').map((a) => a.image_index),
    );
    // Not failed over, so not provably refused (content refusals have codes of their own); a call whose
    // answer said what it billed is counted by that figure instead (billedUndelivered).
    const reported = new Set(losses.billingReported ?? []);
    const unanswered = imagesOfCalls(
      stage,
      own.filter((a) => a.outcome === 'failed' && a.error_code === 'provider_error' && !reported.has(a.image_index)).map((a) => a.image_index),
    );
    made += succeeded;
    cut += timedOut;
    unusable += unanswered;
    images += Math.min(succeeded + timedOut + unanswered, stored.request.n);
  }
  images += losses.billedUndelivered ?? 0;
  if (images === 0) return undefined;
  const reason = notStored
    ? 'not_stored'
    : expired.length > 0
      ? 'task_expired'
      : made > 0
        ? 'partial_failure'
        : cut > 0
          ? 'provider_timeout'
          : unusable > 0
            ? 'no_usable_answer'
            : 'billed_undelivered';
  return { images, reason };
}
