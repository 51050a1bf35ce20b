import type { UpstreamModelSpec } from '../model-spec';

const MB = 1_000_000;

/**
 * Built in: sides 16…1024 (LocalProvider), seed makes the picture deterministic. Inputs (and a mask)
 * change the picture deterministically (local.provider.ts), so the whole input path runs offline.
 */
export const LOCAL_MODELS: readonly UpstreamModelSpec[] = [
  {
    match: 'local-1',
    family: 'local-1',
    sizes: { min_pixels: 16 * 16, max_pixels: 1024 * 1024, min_ratio: 1 / 64, max_ratio: 64, min_side: 16, max_side: 1024 },
    params: { seed: { max: 4_294_967_295 } },
    inputs: { max_images: 4, formats: ['png', 'jpeg', 'webp', 'gif', 'bmp', 'tiff'], max_bytes: 10 * MB, mask: true, delivery: 'inline' },
  },
];
