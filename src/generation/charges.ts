import type { UpstreamLosses } from '../channels/channel-failover';
import type { GenerationAttemptsTable } from '../db/schema';
import { sendsNothingUpstream } from '../providers/formats';
import { callsOf, type StoredGenerationRequest } from './durable';

/**
 * What a generation that delivers nothing still costs, and what the operator loses. The rule, in one
 * place (docs/clients/async-generations.md, "What cancel, disconnect and partial failure cost"):
 * - a cancel or a disconnect keeps the credits of the images whose upstream calls were (or may have
 *   been) sent, and releases the rest: the upstream bills those calls whether or not anyone takes
 *   the images. Queued work and the `local` provider send nothing and are released in full.
 * - a failure is never charged; images the upstream made for it anyway (the other images of a
 *   request whose one image failed, images that could not be stored, calls cut by a timeout or a
 *   takeover) are the operator's loss, counted on the generation and in a metric with their reason.
 * - an accepted task older than its upstream keeps one (descriptor `resume.lifeMs`) is not polled:
 *   the generation fails, and the images of its accepted tasks are the loss (`task_expired`).
 * - images the upstream says it billed beyond those it delivered (Ark's `usage.generated_images`)
 *   are the loss too, on a succeeded generation as on a failed one (`billed_undelivered` when no
 *   other reason applies).
 * Every upstream call is therefore either charged to a key or listed as a loss, never silently dropped.
 */
export type UnbilledReason = 'partial_failure' | 'not_stored' | 'provider_timeout' | 'abandoned' | 'settled_elsewhere' | 'task_expired' | 'billed_undelivered';

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

/** The credits of `images` of a generation that reserved `credits` for `of` images. */
export function creditsOf(images: number, generation: { credits: number; images: number }): number {
  if (generation.images <= 0) return 0;
  return Math.min(generation.credits, Math.round((generation.credits * images) / generation.images));
}

/**
 * What the upstream made (or may have made) for a run that is not charged: the images of its
 * succeeded calls and of its expired tasks, of calls cut by a timeout (the upstream may finish and
 * bill them), and those it billed beyond what it delivered.
 */
export function unbilledOf(
  stored: StoredGenerationRequest,
  attempts: readonly Pick<GenerationAttemptsTable, 'image_index' | 'outcome' | 'error_code'>[],
  notStored: boolean,
  losses: Partial<UpstreamLosses> = {},
): { images: number; reason: UnbilledReason } | undefined {
  const expired = losses.expiredCalls ?? [];
  const made = imagesOfCalls(stored, [...attempts.filter((a) => a.outcome === 'succeeded').map((a) => a.image_index), ...expired]);
  const cut = imagesOfCalls(stored, attempts.filter((a) => a.outcome !== 'succeeded' && a.error_code === 'provider_timeout').map((a) => a.image_index));
  const billedUndelivered = losses.billedUndelivered ?? 0;
  const images = Math.min(made + cut, stored.request.n) + billedUndelivered;
  if (images === 0) return undefined;
  const reason = notStored ? 'not_stored' : expired.length > 0 ? 'task_expired' : made > 0 ? 'partial_failure' : cut > 0 ? 'provider_timeout' : 'billed_undelivered';
  return { images, reason };
}

/** The loss of a succeeded generation: images the upstream billed beyond those it delivered. */
export function unbilledOfDelivered(losses: UpstreamLosses): { images: number; reason: UnbilledReason } | undefined {
  return losses.billedUndelivered > 0 ? { images: losses.billedUndelivered, reason: 'billed_undelivered' } : undefined;
}
