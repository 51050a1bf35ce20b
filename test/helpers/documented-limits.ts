/**
 * Upstream limits as the providers document them, written out here on purpose rather than imported
 * from src/providers/upstream-models.ts: the tests compare the gateway's table (and what it
 * publishes) with these, so a slip in the table cannot agree with itself.
 */

/** Ark, Seedream 4.x input images (volcengine.com/docs/82379/1541523); 10 MB is 10,000,000 bytes. */
export const SEEDREAM_4_INPUT_LIMITS = {
  max_images: 14,
  formats: ['jpeg', 'png', 'webp', 'bmp', 'tiff', 'gif'],
  max_bytes: 10_000_000,
  min_ratio: 1 / 16,
  max_ratio: 16,
  min_side: 15,
  max_pixels: 36_000_000,
  max_inputs_plus_outputs: 15,
  mask: false,
  delivery: 'inline',
};
