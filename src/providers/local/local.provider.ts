import { createHash } from 'node:crypto';
import { ApiError } from '../../errors/api-error';
import type { ProviderImage, ProviderRequest, WireClient } from '../provider';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { encodePng, encodePngOffLoop } from './png';

const MAX_SIDE = 1024;
const MIN_SIDE = 16;
/** Pixels rendered between two turns of the event loop: ~1-2 ms of work, so requests beside a large render wait no longer. */
const PIXELS_PER_SLICE = 32_768;

/** A tiny fixed PNG for benchmarks, where the provider should cost nothing. */
const TINY_PNG = encodePng(1, 1, new Uint8Array([64, 128, 192]));

/**
 * Built-in provider that needs no credentials: renders a real PNG procedurally from the
 * prompt and seed (same input, same picture). Pure JS, a few ms for 256x256.
 * It always hands over the bytes (base64); the gateway's image store turns them into its own URL
 * when the client asked for `url`.
 */
export class LocalProvider implements WireClient {
  constructor(private readonly mode: 'render' | 'tiny' = 'render') {}

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const { width, height } = request;
    if (width < MIN_SIDE || height < MIN_SIDE || width > MAX_SIDE || height > MAX_SIDE) {
      throw new ApiError('invalid_request', `The local provider renders sizes from ${MIN_SIDE}x${MIN_SIDE} to ${MAX_SIDE}x${MAX_SIDE}.`, {
        param: 'size',
      });
    }
    const images: ProviderImage[] = [];
    const inputs = inputsDigest(request);
    for (let index = 0; index < request.n; index += 1) {
      signal.throwIfAborted();
      const png = this.mode === 'tiny' ? TINY_PNG : await render(request, inputs, index, signal);
      images.push({
        b64Json: png.toString('base64'),
        width: this.mode === 'tiny' ? 1 : width,
        height: this.mode === 'tiny' ? 1 : height,
      });
    }
    return images;
  }
}

/**
 * What the input images (and mask) contribute to the picture: a hash of their bytes in order, the
 * mask apart, so the same inputs always give the same picture and any other inputs another one.
 * Empty for a text-only request, which keeps its picture whatever inputs other requests had.
 */
function inputsDigest(request: ProviderRequest): string {
  const images = request.inputImages ?? [];
  if (images.length === 0 && !request.mask) return '';
  const hash = createHash('sha256');
  for (const image of images) hash.update(createHash('sha256').update(image.bytes).digest());
  hash.update('\u0000mask\u0000');
  if (request.mask) hash.update(createHash('sha256').update(request.mask.bytes).digest());
  return hash.digest('hex');
}

/**
 * Soft blobs of colour on a gradient, all parameters drawn from a hash of prompt, seed, index and inputs.
 * Rendered in slices with a turn of the event loop between them, and compressed off the loop: eight
 * parallel n=4 1024x1024 requests held the loop for over a second when this ran in one piece.
 */
async function render(request: ProviderRequest, inputs: string, index: number, signal: AbortSignal): Promise<Buffer> {
  const { width, height } = request;
  const digest = createHash('sha256')
    .update(`${request.prompt}\u0000${request.seed ?? 0}\u0000${index}${inputs ? `\u0000${inputs}` : ''}`)
    .digest();
  const byte = (i: number): number => digest[i % digest.length] as number;
  const blobs = Array.from({ length: 4 }, (_, b) => ({
    x: (byte(b * 5) / 255) * width,
    y: (byte(b * 5 + 1) / 255) * height,
    r2: ((0.15 + (byte(b * 5 + 2) / 255) * 0.35) * Math.min(width, height)) ** 2,
    colour: [byte(b * 5 + 3), byte(b * 5 + 4), byte(b * 5 + 20)] as const,
  }));
  const top = [byte(28), byte(29), byte(30)] as const;
  const bottom = [byte(31), byte(26), byte(27)] as const;
  const rgb = new Uint8Array(width * height * 3);
  const rowsPerSlice = Math.max(1, Math.floor(PIXELS_PER_SLICE / width));
  for (let y = 0; y < height; y += 1) {
    if (y > 0 && y % rowsPerSlice === 0) {
      await yieldToLoop();
      signal.throwIfAborted();
    }
    const t = y / (height - 1 || 1);
    for (let x = 0; x < width; x += 1) {
      let r = top[0] * (1 - t) + bottom[0] * t;
      let g = top[1] * (1 - t) + bottom[1] * t;
      let b = top[2] * (1 - t) + bottom[2] * t;
      for (const blob of blobs) {
        const d2 = (x - blob.x) ** 2 + (y - blob.y) ** 2;
        if (d2 < blob.r2) {
          const w = 1 - d2 / blob.r2;
          r += (blob.colour[0] - r) * w;
          g += (blob.colour[1] - g) * w;
          b += (blob.colour[2] - b) * w;
        }
      }
      const o = (y * width + x) * 3;
      rgb[o] = r;
      rgb[o + 1] = g;
      rgb[o + 2] = b;
    }
  }
  return encodePngOffLoop(width, height, rgb);
}
