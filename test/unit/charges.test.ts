import type { CatalogModel } from '../../src/config/catalog';
import { creditsOf, imagesOfCalls, imagesSentAtCancel, unbilledOf } from '../../src/generation/charges';
import type { StoredGenerationRequest } from '../../src/generation/durable';

/**
 * What cancel, disconnect and partial failure cost (docs/clients/async-generations.md, the table
 * "What cancel, disconnect and partial failure cost"), one row at a time, without a gateway.
 */

/** `visual` and `ark` make one upstream call per image; any other transport one call for all `n`. */
function stored(n: number, options: { provider?: string; transport?: string; markSends?: boolean } = {}): StoredGenerationRequest {
  const provider = options.provider ?? 'jimeng';
  const entry: CatalogModel = {
    model: 'm',
    provider,
    upstream_model: 'up',
    credits_per_image: 2,
    default_size: '1024x1024',
    ...(options.transport !== undefined ? { transport: options.transport } : {}),
  };
  return {
    entry,
    request: { prompt: 'p', upstreamModel: 'up', n, width: 1024, height: 1024, responseFormat: 'url' },
    keep_base64: false,
    mark_sends: options.markSends ?? true,
  };
}

type Attempt = { image_index: number; outcome: string; error_code: string | null };
const ok = (image_index: number): Attempt => ({ image_index, outcome: 'succeeded', error_code: null });
const failed = (image_index: number, error_code: string | null, outcome = 'failed'): Attempt => ({ image_index, outcome, error_code });

describe('imagesOfCalls', () => {
  it('counts one image per call on one-image-per-call transports (visual, ark), each call index once', () => {
    expect(imagesOfCalls(stored(4, { transport: 'visual' }), [0, 2])).toBe(2);
    expect(imagesOfCalls(stored(4, { transport: 'ark' }), [3, 3, 3])).toBe(1);
    expect(imagesOfCalls(stored(4, { transport: 'ark' }), new Set([0, 1, 2, 3]))).toBe(4);
    expect(imagesOfCalls(stored(4, { transport: 'visual' }), [])).toBe(0);
  });

  it('counts the whole request for the one call of other transports', () => {
    expect(imagesOfCalls(stored(3, { provider: 'openai' }), [0])).toBe(3);
    expect(imagesOfCalls(stored(3, { provider: 'openai', transport: 'images' }), [0, 0])).toBe(3);
    expect(imagesOfCalls(stored(3, { provider: 'openai' }), [])).toBe(0);
  });

  it('n = 1 is one image either way', () => {
    expect(imagesOfCalls(stored(1, { transport: 'visual' }), [0])).toBe(1);
    expect(imagesOfCalls(stored(1, { provider: 'openai' }), [0])).toBe(1);
  });

  it('the local provider sends nothing upstream: always 0', () => {
    expect(imagesOfCalls(stored(3, { provider: 'local' }), [0, 1, 2])).toBe(0);
  });
});

describe('imagesSentAtCancel', () => {
  const visual = (n: number, markSends: boolean) => stored(n, { transport: 'visual', markSends });

  it('row "cancel of a queued generation, or of any local one": nothing', () => {
    expect(imagesSentAtCancel(visual(3, true), 'queued', [0, 1, 2])).toBe(0);
    expect(imagesSentAtCancel(visual(3, false), 'queued', [])).toBe(0);
    expect(imagesSentAtCancel(stored(3, { provider: 'local', markSends: true }), 'running', [0, 1])).toBe(0);
    expect(imagesSentAtCancel(stored(3, { provider: 'local', markSends: false }), 'running', [])).toBe(0);
  });

  it('row "cancel of a running asynchronous generation": the images whose calls were marked sent', () => {
    expect(imagesSentAtCancel(visual(3, true), 'running', [])).toBe(0);
    expect(imagesSentAtCancel(visual(3, true), 'running', [0])).toBe(1);
    expect(imagesSentAtCancel(visual(3, true), 'running', [0, 2, 2])).toBe(2);
    // One call for the whole request: once it is marked, every image is.
    expect(imagesSentAtCancel(stored(3, { provider: 'openai', markSends: true }), 'running', [0])).toBe(3);
  });

  it('row "cancel of a running synchronous generation": every image, whatever is marked', () => {
    expect(imagesSentAtCancel(visual(3, false), 'running', [])).toBe(3);
    expect(imagesSentAtCancel(visual(3, false), 'running', [0])).toBe(3);
    expect(imagesSentAtCancel(stored(2, { provider: 'openai', markSends: false }), 'running', [])).toBe(2);
  });
});

describe('creditsOf', () => {
  it('is the share of the reserved credits for the images kept', () => {
    const generation = { credits: 30, images: 3 };
    expect(creditsOf(0, generation)).toBe(0);
    expect(creditsOf(1, generation)).toBe(10);
    expect(creditsOf(2, generation)).toBe(20);
    expect(creditsOf(3, generation)).toBe(30);
  });

  it('rounds an uneven share to the nearest credit', () => {
    expect(creditsOf(1, { credits: 5, images: 3 })).toBe(2); // 1.67
    expect(creditsOf(2, { credits: 5, images: 3 })).toBe(3); // 3.33
    expect(creditsOf(1, { credits: 1, images: 4 })).toBe(0); // 0.25
  });

  it('never more than was reserved, and nothing for a generation of no images', () => {
    expect(creditsOf(5, { credits: 30, images: 3 })).toBe(30);
    expect(creditsOf(2, { credits: 10, images: 0 })).toBe(0);
    expect(creditsOf(2, { credits: 10, images: -1 })).toBe(0);
    expect(creditsOf(3, { credits: 0, images: 3 })).toBe(0);
  });
});

describe('unbilledOf (a failed run is never charged; what the upstream made is the operator loss)', () => {
  const visual = stored(3, { transport: 'visual' });

  // A refusal (a 503, a 500) proves nothing was accepted: its attempt is failed over, whether or not another channel was left.
  it('row "a request fails part-way (n=3, the third call 503)": the images the other calls made, partial_failure', () => {
    expect(unbilledOf(visual, [ok(0), ok(1), failed(2, 'provider_error', 'failed_over')], false)).toEqual({ images: 2, reason: 'partial_failure' });
  });

  it('nothing made and nothing cut: no loss', () => {
    expect(unbilledOf(visual, [], false)).toBeUndefined();
    expect(unbilledOf(visual, [failed(0, 'provider_error', 'failed_over'), failed(0, 'provider_unavailable', 'failed_over')], false)).toBeUndefined();
    // A content refusal made nothing.
    expect(unbilledOf(visual, [failed(0, 'content_policy_violation')], false)).toBeUndefined();
  });

  it('a call that reached the upstream and got no usable answer (a 200 whose body is not a valid answer, a 504): its images, no_usable_answer', () => {
    expect(unbilledOf(visual, [failed(0, 'provider_error')], false)).toEqual({ images: 1, reason: 'no_usable_answer' });
    expect(unbilledOf(stored(4, { provider: 'openai' }), [failed(0, 'provider_error')], false)).toEqual({ images: 4, reason: 'no_usable_answer' });
    // With images made by the other calls: counted together, partial_failure.
    expect(unbilledOf(visual, [ok(0), failed(1, 'provider_error')], false)).toEqual({ images: 2, reason: 'partial_failure' });
  });

  it('row "images made but not stored": every image made, not_stored (before partial_failure)', () => {
    expect(unbilledOf(visual, [ok(0), ok(1), ok(2)], true)).toEqual({ images: 3, reason: 'not_stored' });
    expect(unbilledOf(visual, [ok(0), failed(1, 'provider_error', 'failed_over')], true)).toEqual({ images: 1, reason: 'not_stored' });
  });

  it('row "calls cut by a deadline": the timed-out calls, which the upstream may finish and bill, provider_timeout', () => {
    expect(unbilledOf(visual, [failed(0, 'provider_timeout')], false)).toEqual({ images: 1, reason: 'provider_timeout' });
    // A timed-out call failed over to another channel was still sent to the first.
    expect(unbilledOf(visual, [failed(0, 'provider_timeout', 'failed_over'), failed(1, 'provider_timeout')], false)).toEqual({
      images: 2,
      reason: 'provider_timeout',
    });
  });

  it('made and cut together: counted together, reason partial_failure', () => {
    expect(unbilledOf(visual, [ok(0), failed(1, 'provider_timeout'), failed(2, 'provider_error', 'failed_over')], false)).toEqual({
      images: 2,
      reason: 'partial_failure',
    });
  });

  it('each call index counts once, and never more than the n images requested', () => {
    expect(unbilledOf(visual, [ok(0), ok(0), ok(1)], false)).toEqual({ images: 2, reason: 'partial_failure' });
    // Image 0 timed out on one channel and succeeded on the next: two upstream calls, but at most n images.
    const one = stored(1, { transport: 'ark' });
    expect(unbilledOf(one, [failed(0, 'provider_timeout', 'failed_over'), ok(0)], false)).toEqual({ images: 1, reason: 'partial_failure' });
  });

  it('a one-call transport: the one call makes all n images', () => {
    const openai = stored(4, { provider: 'openai' });
    expect(unbilledOf(openai, [ok(0)], true)).toEqual({ images: 4, reason: 'not_stored' });
    expect(unbilledOf(openai, [failed(0, 'provider_timeout')], false)).toEqual({ images: 4, reason: 'provider_timeout' });
  });

  it('the local provider: never a loss', () => {
    expect(unbilledOf(stored(2, { provider: 'local' }), [ok(0), ok(1)], true)).toBeUndefined();
  });
});
