import type { InputImageFormat } from '../providers/upstream-models';

/** The image formats the gateway takes from upstreams and serves as outputs, recognised by their first bytes (never by a header). */
export type ImageContentType = 'image/png' | 'image/jpeg' | 'image/webp';

/** What the image store may hold: outputs, and the wider set of formats clients send as inputs. */
export type StoredImageContentType = ImageContentType | 'image/gif' | 'image/bmp' | 'image/tiff';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** PNG, JPEG or WebP by magic bytes; undefined for anything else (HTML, JSON, SVG, GIF, truncated). */
export function sniffImageType(bytes: Buffer): ImageContentType | undefined {
  const format = sniffImageFormat(bytes);
  return format === 'png' || format === 'jpeg' || format === 'webp' ? MIME_TYPES[format] : undefined;
}

export const MIME_TYPES = {
  png: 'image/png',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  bmp: 'image/bmp',
  tiff: 'image/tiff',
} as const satisfies Record<InputImageFormat, StoredImageContentType>;

/** Any input format by its magic bytes; undefined for anything else. */
export function sniffImageFormat(bytes: Buffer): InputImageFormat | undefined {
  if (bytes.length >= 8 && bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return 'png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  if (bytes.length >= 6 && (bytes.toString('latin1', 0, 6) === 'GIF87a' || bytes.toString('latin1', 0, 6) === 'GIF89a')) return 'gif';
  if (bytes.length >= 26 && bytes[0] === 0x42 && bytes[1] === 0x4d) return 'bmp';
  if (bytes.length >= 8 && (bytes.toString('latin1', 0, 4) === 'II*\u0000' || bytes.toString('latin1', 0, 4) === 'MM\u0000*')) return 'tiff';
  return undefined;
}

export interface ImageHeader {
  format: InputImageFormat;
  width: number;
  height: number;
  /** PNG only: whether the image has an alpha channel (colour types 4 and 6, or a tRNS chunk). */
  alpha?: boolean;
}

/**
 * The format and the dimensions an image declares in its header, read without decoding any pixel
 * (so a decompression bomb is measured before anything inflates it). Undefined when the bytes are
 * no image of the six formats, or the header is truncated or names a zero size.
 */
export function readImageHeader(bytes: Buffer): ImageHeader | undefined {
  const format = sniffImageFormat(bytes);
  if (!format) return undefined;
  let size: { width: number; height: number; alpha?: boolean } | undefined;
  try {
    size = HEADER_READERS[format](bytes);
  } catch {
    // A RangeError from a read past the end: a truncated header.
    return undefined;
  }
  if (!size || !(size.width > 0) || !(size.height > 0)) return undefined;
  return { format, ...size };
}

/** How much base64 is decoded first to find a header: PNG and WebP name their size in their first 30 bytes, most JPEGs within 64 KiB. */
const BASE64_HEADER_PREFIX = 4 * 16_384;

/**
 * `readImageHeader` of base64 bytes, decoding only the start where the header is (the whole of them
 * only for a JPEG whose frame header comes later, after large metadata).
 */
export function readBase64ImageHeader(base64: string): ImageHeader | undefined {
  if (base64.length > BASE64_HEADER_PREFIX) {
    const start = Buffer.from(base64.slice(0, BASE64_HEADER_PREFIX), 'base64');
    const header = readImageHeader(start);
    if (header || sniffImageFormat(start) === undefined) return header;
  }
  return readImageHeader(Buffer.from(base64, 'base64'));
}

type HeaderReader = (bytes: Buffer) => { width: number; height: number; alpha?: boolean } | undefined;

const HEADER_READERS: Record<InputImageFormat, HeaderReader> = {
  png: (b) => {
    if (b.toString('latin1', 12, 16) !== 'IHDR') return undefined;
    const colourType = b.readUInt8(25);
    return { width: b.readUInt32BE(16), height: b.readUInt32BE(20), alpha: colourType === 4 || colourType === 6 || hasPngChunk(b, 'tRNS') };
  },
  jpeg: readJpegSize,
  webp: (b) => {
    const chunk = b.toString('latin1', 12, 16);
    if (chunk === 'VP8 ') {
      if (b.readUInt8(23) !== 0x9d || b.readUInt8(24) !== 0x01 || b.readUInt8(25) !== 0x2a) return undefined;
      return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
    }
    if (chunk === 'VP8L') {
      if (b.readUInt8(20) !== 0x2f) return undefined;
      const bits = b.readUInt32LE(21);
      return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
    }
    if (chunk === 'VP8X') return { width: b.readUIntLE(24, 3) + 1, height: b.readUIntLE(27, 3) + 1 };
    return undefined;
  },
  gif: (b) => ({ width: b.readUInt16LE(6), height: b.readUInt16LE(8) }),
  bmp: (b) => {
    const dibSize = b.readUInt32LE(14);
    if (dibSize === 12) return { width: b.readUInt16LE(18), height: b.readUInt16LE(20) };
    // Negative height: rows stored top-down; the size is its absolute value.
    return { width: b.readInt32LE(18), height: Math.abs(b.readInt32LE(22)) };
  },
  tiff: readTiffSize,
};

function hasPngChunk(b: Buffer, type: string): boolean {
  // Chunks before the image data: IHDR, then ancillary ones (tRNS must come before IDAT).
  for (let at = 8; at + 8 <= b.length;) {
    const length = b.readUInt32BE(at);
    const name = b.toString('latin1', at + 4, at + 8);
    if (name === type) return true;
    if (name === 'IDAT' || name === 'IEND') return false;
    at += 12 + length;
  }
  return false;
}

/** The first start-of-frame segment's size (SOF0…SOF15 but DHT, JPG and DAC), walking the segments. */
function readJpegSize(b: Buffer): { width: number; height: number } | undefined {
  let at = 2;
  while (at + 4 <= b.length) {
    if (b.readUInt8(at) !== 0xff) return undefined;
    const marker = b.readUInt8(at + 1);
    if (marker === 0xff) {
      at += 1; // fill byte
      continue;
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
      at += 2; // markers without a length
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return undefined; // end of image or scan data before any frame header
    const length = b.readUInt16BE(at + 2);
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: b.readUInt16BE(at + 5), width: b.readUInt16BE(at + 7) };
    }
    at += 2 + length;
  }
  return undefined;
}

/** ImageWidth (256) and ImageLength (257) of the first image file directory. */
function readTiffSize(b: Buffer): { width: number; height: number } | undefined {
  const little = b.readUInt8(0) === 0x49;
  const u16 = (at: number) => (little ? b.readUInt16LE(at) : b.readUInt16BE(at));
  const u32 = (at: number) => (little ? b.readUInt32LE(at) : b.readUInt32BE(at));
  const directory = u32(4);
  const entries = u16(directory);
  let width: number | undefined;
  let height: number | undefined;
  for (let i = 0; i < entries; i++) {
    const entry = directory + 2 + i * 12;
    const tag = u16(entry);
    if (tag !== 256 && tag !== 257) continue;
    const type = u16(entry + 2);
    // SHORT (3) sits left-justified in the 4-byte value field; LONG (4) fills it.
    const value = type === 3 ? u16(entry + 8) : type === 4 ? u32(entry + 8) : undefined;
    if (tag === 256) width = value;
    else height = value;
  }
  return width !== undefined && height !== undefined ? { width, height } : undefined;
}
