import { crc32, deflateSync } from 'node:zlib';

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A real PNG (RGB, or RGBA with `alpha`) of one colour, decodable by any reader. */
export function testPng(width: number, height: number, options: { alpha?: boolean; shade?: number } = {}): Buffer {
  const channels = options.alpha ? 4 : 3;
  const row = Buffer.alloc(1 + width * channels, options.shade ?? 0x80);
  row[0] = 0; // filter: none
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.writeUInt8(8, 8);
  header.writeUInt8(options.alpha ? 6 : 2, 9);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.concat(Array.from({ length: height }, () => row)))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A PNG whose header claims `width` x `height` over a tiny body: what a decompression bomb looks like before it inflates. */
export function claimedPng(width: number, height: number): Buffer {
  const png = testPng(1, 1);
  png.writeUInt32BE(width, 16);
  png.writeUInt32BE(height, 20);
  return png;
}

/** `size` zero bytes opening with `signature` (latin1): a format's magic numbers, the rest for the caller to fill. */
function opening(size: number, signature: string): Buffer {
  const b = Buffer.alloc(size);
  b.write(signature, 0, 'latin1');
  return b;
}

/** A WebP file's RIFF container (its length left 0) around a `chunk` header: 'VP8 ' lossy, 'VP8L' lossless, 'VP8X' extended. */
const webp = (size: number, chunk: 'VP8 ' | 'VP8L' | 'VP8X') => opening(size, `RIFF\0\0\0\0WEBP${chunk}`);

/** Just enough of each format's header for the sniffer and the dimension reader (not decodable images). */
export const headerOnly = {
  jpeg(width: number, height: number): Buffer {
    // SOI, an APP0 segment, then SOF0 with height and width.
    const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, ...Buffer.from('JFIF\0'), 1, 1, 0, 0, 1, 0, 1, 0, 0]);
    const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 8, height >> 8, height & 0xff, width >> 8, width & 0xff, 3, 1, 0x11, 0, 2, 0x11, 1, 3, 0x11, 1]);
    return Buffer.concat([Buffer.from([0xff, 0xd8]), app0, sof, Buffer.from([0xff, 0xd9])]);
  },
  gif(width: number, height: number): Buffer {
    const b = opening(13, 'GIF89a');
    b.writeUInt16LE(width, 6);
    b.writeUInt16LE(height, 8);
    return b;
  },
  bmp(width: number, height: number): Buffer {
    const b = opening(54, 'BM');
    b.writeUInt32LE(40, 14);
    b.writeInt32LE(width, 18);
    b.writeInt32LE(-height, 22);
    return b;
  },
  webpLossy(width: number, height: number): Buffer {
    const b = webp(30, 'VP8 ');
    b.set([0x9d, 0x01, 0x2a], 23);
    b.writeUInt16LE(width, 26);
    b.writeUInt16LE(height, 28);
    return b;
  },
  webpLossless(width: number, height: number): Buffer {
    const b = webp(25, 'VP8L');
    b[20] = 0x2f;
    b.writeUInt32LE(((width - 1) & 0x3fff) | (((height - 1) & 0x3fff) << 14), 21);
    return b;
  },
  webpExtended(width: number, height: number): Buffer {
    const b = webp(30, 'VP8X');
    b.writeUIntLE(width - 1, 24, 3);
    b.writeUIntLE(height - 1, 27, 3);
    return b;
  },
  tiff(width: number, height: number, order: 'II' | 'MM' = 'II'): Buffer {
    const little = order === 'II';
    const b = Buffer.alloc(8 + 2 + 2 * 12 + 4);
    const u16 = (v: number, at: number) => (little ? b.writeUInt16LE(v, at) : b.writeUInt16BE(v, at));
    const u32 = (v: number, at: number) => (little ? b.writeUInt32LE(v, at) : b.writeUInt32BE(v, at));
    b.write(order, 0, 'latin1');
    u16(42, 2);
    u32(8, 4);
    u16(2, 8);
    // ImageWidth as LONG, ImageLength as SHORT.
    (u16(256, 10), u16(4, 12), u32(1, 14), u32(width, 18));
    (u16(257, 22), u16(3, 24), u32(1, 26), u16(height, 30));
    return b;
  },
};

export const dataUri = (bytes: Buffer, type = 'image/png') => `data:${type};base64,${bytes.toString('base64')}`;

export type MultipartPart = { name: string; value: string } | { name: string; filename: string; bytes: Buffer; type?: string };

/** A multipart/form-data body as any client frames it (raw, for tests that send odd ones too). */
export function multipartBody(parts: MultipartPart[], boundary = 'cgw-boundary-7MA4YWxkTrZu0gW'): { body: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = 'filename' in part ? `form-data; name="${part.name}"; filename="${part.filename}"` : `form-data; name="${part.name}"`;
    const type = 'filename' in part ? `\r\nContent-Type: ${part.type ?? 'application/octet-stream'}` : '';
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`),
      'filename' in part ? part.bytes : Buffer.from(part.value),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/**
 * A real 24-bit BMP whose every byte is below 0x80 (for paths that carry bodies as UTF-8 text, such
 * as Prism's proxy): grey pixels, bottom-up rows. Large sizes only claim their size (a bomb's header).
 */
export function asciiSafeBmp(width: number, height: number): Buffer {
  const rowBytes = Math.ceil((width * 3) / 4) * 4;
  const pixels = width * height <= 64 * 64 ? Buffer.alloc(rowBytes * height, 0x40) : Buffer.alloc(0);
  const b = opening(54, 'BM');
  b.writeUInt32LE(54 + pixels.length, 2);
  b.writeUInt32LE(54, 10);
  b.writeUInt32LE(40, 14);
  b.writeInt32LE(width, 18);
  b.writeInt32LE(height, 22);
  b.writeUInt16LE(1, 26);
  b.writeUInt16LE(24, 28);
  b.writeUInt32LE(pixels.length, 34);
  const bytes = Buffer.concat([b, pixels]);
  if (bytes.some((byte) => byte >= 0x80)) throw new Error(`asciiSafeBmp(${width}, ${height}) has a byte over 0x7f`);
  return bytes;
}
