import { ApiError } from '../../errors/api-error';
import type { ProviderInputImage } from '../../providers/provider';
import type { InputImageFormat, InputImageLimits } from '../../providers/upstream-models';
import { GuardedFetchError, getGuarded } from '../../shared/outbound';
import { type ImageHeader, MIME_TYPES, readImageHeader } from '../image-bytes';
import type { ImageOwner } from '../images.repository';
import type { ImagesService } from '../images.service';
import { GATEWAY_INPUT_LIMITS, checkInputCounts, checkInputImage, checkMask, inputByteLimit } from './input-limits';
import { type InputSource, decodedLength, inputSourceOf } from './input-source';

/** A request's inputs as it names them: strings of the JSON API, or the bytes of uploaded files. */
export interface RequestedInputs {
  images?: readonly (string | Buffer)[] | undefined;
  mask?: string | Buffer | undefined;
}

/** One input read and checked; `storedId` when it named an image already in the store. */
export interface CheckedInput {
  param: string;
  bytes: Buffer;
  header: ImageHeader;
  storedId?: string;
}

export interface CheckedInputs {
  /** Whose request they are: the stored inputs carry it. */
  owner: ImageOwner;
  delivery: InputImageLimits['delivery'];
  images: CheckedInput[];
  mask?: CheckedInput;
}

/** One input as a generation's stored request keeps it: by id in the image store. */
export interface StoredInputImage {
  id: string;
  format: InputImageFormat;
  width: number;
  height: number;
}

/** generations.request's `inputs`: what a run on any replica reads back to send exactly the same inputs. */
export interface StoredInputs {
  delivery: InputImageLimits['delivery'];
  images: StoredInputImage[];
  mask?: StoredInputImage;
}

export interface InputImagesDeps {
  images: ImagesService;
  /** Tests only: https inputs may come from private addresses. */
  allowPrivateUrls?: boolean;
  fetchTimeoutMs?: number;
}

/**
 * Image inputs, from the request to the provider: read (each within its byte limit while reading),
 * sniffed and measured from the header, checked against the model's limits, all before anything is
 * reserved; stored under the generation (so a takeover sends the same ones); read back for each run.
 */
export class InputImages {
  constructor(private readonly deps: InputImagesDeps) {}

  /** Reads and checks a request's inputs for `model`; undefined when it has none. Throws the documented 4xx refusals. */
  async intake(
    owner: ImageOwner,
    model: string,
    limits: InputImageLimits | undefined,
    requested: RequestedInputs,
    signal?: AbortSignal,
  ): Promise<CheckedInputs | undefined> {
    const items = requested.images ?? [];
    checkInputCounts(model, limits, items.length, requested.mask !== undefined);
    if (!limits || items.length === 0) return undefined;
    if (limits.delivery === 'url') {
      const problem = this.deps.images.publicUrlProblem();
      if (problem) {
        throw new ApiError(
          'image_input_public_url_required',
          `Model ${model} fetches its input images from the gateway's own URLs, and its upstream cannot reach them: ${problem}. The operator must set PUBLIC_BASE_URL to the gateway's public address.`,
          { param: 'images' },
        );
      }
    }
    const sources = items.map((item, i) => inputSourceOf(item, `images[${i}]`));
    const maskSource = requested.mask === undefined ? undefined : inputSourceOf(requested.mask, 'mask');
    let used = 0;
    const images: CheckedInput[] = [];
    // One after another: the byte budget of each depends on what the earlier ones used.
    for (const [i, source] of sources.entries()) {
      const input = await this.read(owner, model, limits, source, `images[${i}]`, used, signal);
      used += input.bytes.length;
      images.push(input);
    }
    const checked: CheckedInputs = { owner, delivery: limits.delivery, images };
    if (maskSource) {
      checked.mask = await this.read(owner, model, limits, maskSource, 'mask', used, signal);
      checkMask((images[0] as CheckedInput).header, checked.mask.header);
    }
    return checked;
  }

  private async read(
    owner: ImageOwner,
    model: string,
    limits: InputImageLimits,
    source: InputSource,
    param: string,
    usedBefore: number,
    signal?: AbortSignal,
  ): Promise<CheckedInput> {
    const { maxBytes, refusal } = inputByteLimit(limits, usedBefore);
    const tooLarge = () => refusal(param);
    let bytes: Buffer;
    let storedId: string | undefined;
    switch (source.kind) {
      case 'upload':
        bytes = source.bytes;
        if (bytes.length > maxBytes) throw tooLarge();
        break;
      case 'data':
        // Measured from its length, so an over-limit payload is never decoded.
        if (decodedLength(source.base64) > maxBytes) throw tooLarge();
        bytes = Buffer.from(source.base64, 'base64');
        break;
      case 'stored': {
        const row = await this.deps.images.findOwned(source.id, owner);
        if (!row)
          throw new ApiError(
            'image_input_not_found',
            `${param}: no image ${source.id} is stored for this ${owner.kind === 'key' ? 'key' : 'service'} (never, another's, or past its retention).`,
            { param },
          );
        if (Number(row.byte_size) > maxBytes) throw tooLarge();
        bytes = await this.deps.images.readBytes(row);
        storedId = row.id;
        break;
      }
      case 'url':
        bytes = await this.fetch(source.url, param, maxBytes, tooLarge, signal);
        break;
    }
    const header = checkInputImage(model, limits, param, readImageHeader(bytes));
    return { param, bytes, header, ...(storedId !== undefined ? { storedId } : {}) };
  }

  private async fetch(url: string, param: string, maxBytes: number, tooLarge: () => ApiError, signal?: AbortSignal): Promise<Buffer> {
    try {
      return await getGuarded(url, {
        maxBytes,
        timeoutMs: this.deps.fetchTimeoutMs ?? GATEWAY_INPUT_LIMITS.fetchTimeoutMs,
        allowPrivate: this.deps.allowPrivateUrls ?? false,
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (error instanceof GuardedFetchError && error.kind === 'too_large') throw tooLarge();
      signal?.throwIfAborted();
      const why = error instanceof GuardedFetchError ? error.message : `${url} could not be fetched`;
      throw new ApiError('image_input_unreachable', `${param}: ${why}.`, { param });
    }
  }

  /**
   * Stores the checked inputs under `generationId` (before its reservation: a refused reservation
   * leaves them to expire unseen). Inputs named by `img_` id are already stored: kept by that id.
   */
  async keep(generationId: string, checked: CheckedInputs): Promise<StoredInputs> {
    const all = [
      ...checked.images.map((input, position) => ({ input, role: 'input' as const, position })),
      ...(checked.mask ? [{ input: checked.mask, role: 'mask' as const, position: 0 }] : []),
    ];
    const fresh = all.filter(({ input }) => input.storedId === undefined);
    const rows = await this.deps.images.keepInputs(
      generationId,
      checked.owner,
      fresh.map(({ input, role, position }) => ({
        bytes: input.bytes,
        contentType: MIME_TYPES[input.header.format],
        role,
        position,
        width: input.header.width,
        height: input.header.height,
      })),
    );
    const ids = new Map(fresh.map(({ input }, i) => [input, (rows[i] as { id: string }).id]));
    const stored = (input: CheckedInput): StoredInputImage => ({
      id: input.storedId ?? (ids.get(input) as string),
      format: input.header.format,
      width: input.header.width,
      height: input.header.height,
    });
    return { delivery: checked.delivery, images: checked.images.map(stored), ...(checked.mask ? { mask: stored(checked.mask) } : {}) };
  }

  /**
   * The provider's inputs for one run, read back from the store by id: the same bytes on any
   * replica. `url` delivery adds the gateway's signed URL of each, valid as long as the image is kept.
   * An input swept meanwhile (a generation queued past the retention) fails the run.
   */
  async resolve(stored: StoredInputs): Promise<{ inputImages: ProviderInputImage[]; mask?: ProviderInputImage }> {
    const one = async (input: StoredInputImage): Promise<ProviderInputImage> => {
      const row = await this.deps.images.findStored(input.id);
      if (!row) throw new ApiError('image_expired', `Input image ${input.id} is no longer kept; submit the generation again.`);
      const bytes = await this.deps.images.readBytes(row);
      return {
        bytes,
        format: input.format,
        mimeType: MIME_TYPES[input.format],
        width: input.width,
        height: input.height,
        ...(stored.delivery === 'url' ? { url: this.deps.images.signedUrl({ id: row.id, expires_at: Number(row.expires_at) }) } : {}),
      };
    };
    const inputImages = await Promise.all(stored.images.map(one));
    return { inputImages, ...(stored.mask ? { mask: await one(stored.mask) } : {}) };
  }
}
