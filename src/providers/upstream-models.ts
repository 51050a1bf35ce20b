import { FORMATS } from './formats';
import { findModelSpec, seedFor, type UpstreamModelSpec } from './model-spec';

export type { InputImageFormat, InputImageLimits, SizeBounds, UpstreamModelParams, UpstreamModelSpec } from './model-spec';
export { checkSize, parseSize, sizeOutOfBounds } from './model-spec';

/** Every format's model rows, in registry order (docs/operators/providers.md shows them with sources). */
export const UPSTREAM_MODELS: readonly UpstreamModelSpec[] = FORMATS.flatMap((descriptor) => descriptor.models);

/** The families the tables know (catalog `upstream_family`). */
export const UPSTREAM_FAMILIES: readonly string[] = UPSTREAM_MODELS.map((spec) => spec.family);

/** The row for an upstream model id (or its declared family), over every format. */
export function upstreamModelSpec(upstreamModel: string, family?: string): UpstreamModelSpec | undefined {
  return findModelSpec(UPSTREAM_MODELS, upstreamModel, family);
}

/** The seed to send for the image at `index` (model-spec.ts seedFor), looked up over every format. */
export function upstreamSeed(upstreamModel: string, seed: number | undefined, index: number): number | undefined {
  return seedFor(upstreamModelSpec(upstreamModel), seed, index);
}
