import { crc32, deflateSync } from 'node:zlib';

/**
 * Real images of any size for the fakes to answer with, cheap at any size: one colour, so a PNG is a
 * 1-bit palette image whose zeroed scanlines deflate to a few hundred bytes, and a JPEG is a greyscale
 * baseline image whose every 8x8 block codes in two bits. Both decode in any reader (checked with
 * ImageMagick's `identify`), and their headers carry the size, as an upstream's images do. Cached per
 * size: a fake answering the same size many times builds it once.
 */
const cache = new Map<string, Buffer>();

function cached(key: string, build: () => Buffer): Buffer {
  let bytes = cache.get(key);
  if (!bytes) {
    bytes = build();
    cache.set(key, bytes);
  }
  return bytes;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(data, crc32(Buffer.from(type, 'latin1'))), 0);
  return Buffer.concat([head, data, crc]);
}

/** A PNG of `width` x `height` pixels, all one grey. */
export function solidPng(width: number, height: number): Buffer {
  return cached(`png ${width}x${height}`, () => {
    const header = Buffer.alloc(13);
    header.writeUInt32BE(width, 0);
    header.writeUInt32BE(height, 4);
    header[8] = 1; // bit depth
    header[9] = 3; // colour type: palette
    // Every scanline: filter byte 0 and index 0 for each pixel.
    const scanlines = Buffer.alloc((1 + Math.ceil(width / 8)) * height);
    return Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      pngChunk('IHDR', header),
      pngChunk('PLTE', Buffer.from([0x80, 0x80, 0x80])),
      pngChunk('IDAT', deflateSync(scanlines)),
      pngChunk('IEND', Buffer.alloc(0)),
    ]);
  });
}

const segment = (marker: number, body: number[]) => Buffer.from([0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff, ...body]);

/**
 * A baseline JPEG of `width` x `height` pixels, all mid grey: one component, a quantisation table of
 * ones, and Huffman tables of one code each (DC difference 0, end of block), so every block is `00`.
 */
export function solidJpeg(width: number, height: number): Buffer {
  return cached(`jpeg ${width}x${height}`, () => {
    const blocks = Math.ceil(width / 8) * Math.ceil(height / 8);
    // Two bits a block; the last byte padded with ones, as the standard asks.
    const scan = Buffer.alloc(Math.ceil((blocks * 2) / 8));
    const usedBits = (blocks * 2) % 8;
    if (usedBits !== 0) scan[scan.length - 1] = 0xff >> usedBits;
    const oneCode = (tableClass: number) => [(tableClass << 4) | 0, 1, ...Array<number>(15).fill(0), 0];
    return Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      segment(0xe0, [0x4a, 0x46, 0x49, 0x46, 0x00, 1, 1, 0, 0, 1, 0, 1, 0, 0]),
      segment(0xdb, [0, ...Array<number>(64).fill(1)]),
      segment(0xc0, [8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0]),
      segment(0xc4, oneCode(0)),
      segment(0xc4, oneCode(1)),
      segment(0xda, [1, 1, 0x00, 0, 63, 0]),
      scan,
      Buffer.from([0xff, 0xd9]),
    ]);
  });
}

/** `solidPng` as base64, as the APIs that answer inline put it. */
export const solidPngB64 = (width: number, height: number): string => solidPng(width, height).toString('base64');
