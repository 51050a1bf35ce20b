import { ApiError } from '../../errors/api-error';

/** Where one input image comes from, as the request names it. */
export type InputSource = { kind: 'upload'; bytes: Buffer } | { kind: 'url'; url: string } | { kind: 'data'; base64: string } | { kind: 'stored'; id: string };

const DATA_URI = /^data:image\/[a-z0-9.+-]+;base64,/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const IMAGE_ID = /^img_[0-9A-Za-z]{1,64}$/;

/** An item of `images` (or the `mask`): an uploaded file's bytes, an https URL, a data URI or an `img_` id. */
export function inputSourceOf(item: string | Buffer, param: string): InputSource {
  if (Buffer.isBuffer(item)) return { kind: 'upload', bytes: item };
  if (IMAGE_ID.test(item)) return { kind: 'stored', id: item };
  const prefix = DATA_URI.exec(item);
  if (prefix) {
    const base64 = item.slice(prefix[0].length);
    if (base64.length === 0 || base64.length % 4 !== 0 || !BASE64.test(base64)) {
      throw new ApiError('image_input_invalid', `${param}: the data URI's payload is not base64 (A-Z, a-z, 0-9, +, /, padded with = to a multiple of 4).`, {
        param,
      });
    }
    return { kind: 'data', base64 };
  }
  if (item.startsWith('https://')) {
    try {
      return { kind: 'url', url: new URL(item).toString() };
    } catch {
      throw new ApiError('image_input_invalid', `${param}: not a URL.`, { param });
    }
  }
  throw new ApiError(
    'image_input_invalid',
    `${param}: give an https:// URL, a data:image/...;base64, URI or the id (img_...) of an image of yours in the gateway's store.`,
    { param },
  );
}

/** Bytes a base64 payload decodes to, from its length (without decoding it). */
export function decodedLength(base64: string): number {
  const padding = base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0;
  return (base64.length / 4) * 3 - padding;
}
