import { ApiError } from '../../errors/api-error';
import type { InputImageLimits } from '../../providers/upstream-models';
import type { ImageHeader } from '../image-bytes';

const MIB = 1024 * 1024;

/**
 * The gateway's own bounds on input images, whatever the model: the spec declares the same numbers
 * (InputImages, OpenAIImageEditRequest, GenerationPayloadTooLarge; test/unit/input-limits.test.ts
 * checks they agree). A model's own limits (upstream-models.ts) are narrower and checked too.
 */
export const GATEWAY_INPUT_LIMITS = {
  /** Input images in one request (the mask not counted). */
  maxImages: 16,
  /** One input, whatever its model takes: the largest any upstream documents (Jimeng 4.0). */
  maxImageBytes: 15 * MIB,
  /** All inputs and the mask of one request together. */
  maxTotalBytes: 50 * MIB,
  /** Width × height of one input, read from its header before anything decodes it (decompression bombs). */
  maxPixels: 36_000_000,
  /** A body of an operation that takes image inputs: the inputs as base64 JSON plus the rest of the request. */
  maxBodyBytes: 72 * MIB,
  /** An https input's whole download. */
  fetchTimeoutMs: 10_000,
} as const;

/** What the intake counts before it reads any input: a model without inputs, too many, a mask it does not take. */
export function checkInputCounts(model: string, limits: InputImageLimits | undefined, count: number, hasMask: boolean): void {
  const unsupported = (message: string, param: string) => new ApiError('image_input_unsupported', message, { param });
  if (count === 0 && hasMask) throw unsupported('A mask needs the images it masks: send `images` too.', 'mask');
  if (count === 0) return;
  if (!limits) throw unsupported(`Model ${model} takes no input images.`, 'images');
  if (count > limits.max_images) throw unsupported(`Model ${model} takes at most ${limits.max_images} input images; this request has ${count}.`, 'images');
  // The bound is per upstream call, and the gateway asks these upstreams for one image per call (n calls).
  if (limits.max_inputs_plus_outputs !== undefined && count + 1 > limits.max_inputs_plus_outputs) {
    throw unsupported(
      `Model ${model} takes at most ${limits.max_inputs_plus_outputs - 1} input images (inputs and the output of each upstream call together at most ${limits.max_inputs_plus_outputs}); this request has ${count}.`,
      'images',
    );
  }
  if (hasMask && !limits.mask) throw unsupported(`Model ${model} takes no mask.`, 'mask');
}

/**
 * A model's input limits as a client meets them: its own within the gateway's bounds. `GET /v1/models`
 * shows these, and the intake checks them.
 */
export function effectiveInputLimits(limits: InputImageLimits): InputImageLimits {
  return {
    ...limits,
    formats: [...limits.formats],
    max_images: Math.min(limits.max_images, GATEWAY_INPUT_LIMITS.maxImages),
    max_bytes: Math.min(limits.max_bytes, GATEWAY_INPUT_LIMITS.maxImageBytes),
    max_pixels: Math.min(limits.max_pixels ?? GATEWAY_INPUT_LIMITS.maxPixels, GATEWAY_INPUT_LIMITS.maxPixels),
  };
}

const bytes = (n: number) => (n % MIB === 0 ? `${n} bytes (${n / MIB} MiB)` : `${n} bytes`);

/**
 * 413 image_input_too_large for one input over the gateway's own bound: the same words for a file
 * cut while it streams and for a data URI, URL or stored image of a model that takes more.
 */
export function inputOverGatewayBound(param: string): ApiError {
  return new ApiError('image_input_too_large', `${param}: larger than ${bytes(GATEWAY_INPUT_LIMITS.maxImageBytes)}, the most any input image may have.`, {
    param,
  });
}

/** 413 image_input_too_large for the input that takes a request's inputs past the gateway's total bound, in whatever form they came. */
export function inputsOverTotal(param: string): ApiError {
  return new ApiError(
    'image_input_too_large',
    `${param}: the request's inputs pass ${bytes(GATEWAY_INPUT_LIMITS.maxTotalBytes)}, the most all inputs and the mask of one request may have together.`,
    { param },
  );
}

/** The most bytes the input named `param` may have, given what the request's earlier inputs used, and its refusal past them. */
export function inputByteLimit(limits: InputImageLimits, usedBefore: number): { maxBytes: number; refusal: (param: string) => ApiError } {
  const perImage = effectiveInputLimits(limits).max_bytes;
  const left = GATEWAY_INPUT_LIMITS.maxTotalBytes - usedBefore;
  if (left < perImage) return { maxBytes: Math.max(0, left), refusal: inputsOverTotal };
  if (perImage === GATEWAY_INPUT_LIMITS.maxImageBytes) return { maxBytes: perImage, refusal: inputOverGatewayBound };
  return {
    maxBytes: perImage,
    refusal: (param) =>
      new ApiError('image_input_too_large', `${param}: larger than ${bytes(perImage)}, the most this model takes per input image (input_limits.max_bytes).`, {
        param,
      }),
  };
}

/**
 * One read input, by its header: within the pixel bound (413, before any decoding), then in a format
 * and shape the model takes (400). `header` is undefined when the bytes are no image the gateway reads.
 */
export function checkInputImage(model: string, limits: InputImageLimits, param: string, header: ImageHeader | undefined): ImageHeader {
  if (!header)
    throw new ApiError('image_input_invalid', `${param}: the bytes are not a PNG, JPEG, WebP, GIF, BMP or TIFF image (or its header is damaged).`, { param });
  const { width, height, format } = header;
  const pixels = width * height;
  const maxPixels = effectiveInputLimits(limits).max_pixels ?? GATEWAY_INPUT_LIMITS.maxPixels;
  if (pixels > maxPixels)
    throw new ApiError('image_input_too_large', `${param}: ${width} x ${height} is ${pixels} pixels; the most an input may have here is ${maxPixels}.`, {
      param,
    });
  const unsupported = (why: string) => new ApiError('image_input_unsupported', `${param}: ${why}`, { param });
  if (!limits.formats.includes(format)) throw unsupported(`model ${model} takes ${limits.formats.join(', ')} inputs; this image is ${format}.`);
  if (limits.min_side !== undefined && Math.min(width, height) < limits.min_side)
    throw unsupported(`each side must be at least ${limits.min_side} px on model ${model} (it is ${width} x ${height}).`);
  if (limits.max_side !== undefined && Math.max(width, height) > limits.max_side)
    throw unsupported(`each side must be at most ${limits.max_side} px on model ${model} (it is ${width} x ${height}).`);
  const ratio = width / height;
  if ((limits.min_ratio !== undefined && ratio < limits.min_ratio) || (limits.max_ratio !== undefined && ratio > limits.max_ratio)) {
    throw unsupported(
      `width / height must be between ${formatRatio(limits.min_ratio ?? 0)} and ${formatRatio(limits.max_ratio ?? Number.POSITIVE_INFINITY)} on model ${model} (it is ${width} x ${height}).`,
    );
  }
  return header;
}

/**
 * Whether inputs read and checked for one model (intake) fit another's `limits` as they are: the same
 * checks, as a yes or no (a fallback model that would refuse them is skipped). `delivery`: how they
 * were stored for the first model; the other must take them the same way.
 */
export function inputsFit(
  model: string,
  limits: InputImageLimits | undefined,
  inputs:
    | { delivery: InputImageLimits['delivery']; images: ReadonlyArray<{ bytes: Buffer; header: ImageHeader }>; mask?: { bytes: Buffer; header: ImageHeader } }
    | undefined,
): boolean {
  if (!inputs || inputs.images.length === 0) return true;
  if (!limits || limits.delivery !== inputs.delivery) return false;
  try {
    checkInputCounts(model, limits, inputs.images.length, inputs.mask !== undefined);
    let used = 0;
    for (const input of [...inputs.images, ...(inputs.mask ? [inputs.mask] : [])]) {
      if (input.bytes.length > inputByteLimit(limits, used).maxBytes) return false;
      used += input.bytes.length;
      checkInputImage(model, limits, 'images', input.header);
    }
    return true;
  } catch (error) {
    if (error instanceof ApiError) return false;
    throw error;
  }
}

/** An edit's mask: a PNG with an alpha channel, the size of the first image. */
export function checkMask(first: ImageHeader, mask: ImageHeader): void {
  const unsupported = (why: string) => new ApiError('image_input_unsupported', `mask: ${why}`, { param: 'mask' });
  if (mask.format !== 'png' || !mask.alpha) throw unsupported('must be a PNG with an alpha channel (transparent where the image is to change).');
  if (mask.width !== first.width || mask.height !== first.height)
    throw unsupported(`must be the size of the first image (${first.width} x ${first.height}); it is ${mask.width} x ${mask.height}.`);
}

function formatRatio(ratio: number): string {
  return ratio > 0 && ratio < 1 ? `1/${Math.round(1 / ratio)}` : String(ratio);
}
