import { promisify } from 'node:util';
import { crc32, deflate, deflateSync } from 'node:zlib';

const deflateAsync = promisify(deflate);

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(data, crc32(Buffer.from(type, 'ascii'))), 0);
  return Buffer.concat([head, data, crc]);
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The scanlines of 8-bit RGB pixels (width*height*3 bytes, row-major), each behind filter byte 0 (none). */
function scanlines(width: number, height: number, rgb: Uint8Array): Buffer {
  const stride = width * 3;
  const raw = Buffer.alloc((stride + 1) * height);
  for (let y = 0; y < height; y += 1) {
    raw[y * (stride + 1)] = 0;
    raw.set(rgb.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  }
  return raw;
}

function assemble(width: number, height: number, compressed: Buffer): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: truecolour RGB
  return Buffer.concat([SIGNATURE, chunk('IHDR', header), chunk('IDAT', compressed), chunk('IEND', Buffer.alloc(0))]);
}

/** Encodes 8-bit RGB pixels (width*height*3 bytes, row-major) as a PNG file. */
export function encodePng(width: number, height: number, rgb: Uint8Array): Buffer {
  return assemble(width, height, deflateSync(scanlines(width, height, rgb), { level: 1 }));
}

/** The same bytes as encodePng, compressed on libuv's thread pool instead of the event loop. */
export async function encodePngOffLoop(width: number, height: number, rgb: Uint8Array): Promise<Buffer> {
  return assemble(width, height, await deflateAsync(scanlines(width, height, rgb), { level: 1 }));
}
