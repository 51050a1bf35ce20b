/**
 * What the fake upstreams make of the input images they receive, as the real ones would: the
 * format read from the bytes (kept apart from the gateway's own sniffer on purpose, so a drift
 * shows), a data URI decoded, a URL fetched.
 */
export interface ReceivedImage {
  /** How it arrived. */
  via: 'data-uri' | 'url';
  /** The URL fetched (via `url`). */
  url?: string;
  /** The format the data URI declared (via `data-uri`). */
  declared?: string;
  /** The format the bytes are, or undefined when they are no image. */
  format?: string;
  width?: number;
  height?: number;
  bytes: Buffer;
}

/** The format named by the leading bytes, and the size where the header is simple to read. */
export function sniff(bytes: Buffer): { format?: string; width?: number; height?: number } {
  if (
    bytes.length >= 24 &&
    bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) &&
    bytes.toString('latin1', 12, 16) === 'IHDR'
  ) {
    return { format: 'png', width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  }
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return { format: 'jpeg', ...jpegSize(bytes) };
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return { format: 'webp' };
  if (bytes.length >= 10 && /^GIF8[79]a$/.test(bytes.toString('latin1', 0, 6)))
    return { format: 'gif', width: bytes.readUInt16LE(6), height: bytes.readUInt16LE(8) };
  if (bytes.length >= 26 && bytes.toString('latin1', 0, 2) === 'BM')
    return { format: 'bmp', width: bytes.readInt32LE(18), height: Math.abs(bytes.readInt32LE(22)) };
  if (bytes.length >= 4 && (bytes.toString('latin1', 0, 4) === 'II*\u0000' || bytes.toString('latin1', 0, 4) === 'MM\u0000*')) return { format: 'tiff' };
  return {};
}

/** A JPEG's size from its first start-of-frame segment. */
function jpegSize(bytes: Buffer): { width?: number; height?: number } {
  let offset = 2;
  while (offset + 9 < bytes.length && bytes[offset] === 0xff) {
    const marker = bytes[offset + 1]!;
    const length = bytes.readUInt16BE(offset + 2);
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: bytes.readUInt16BE(offset + 5), width: bytes.readUInt16BE(offset + 7) };
    }
    offset += 2 + length;
  }
  return {};
}

/** `data:image/<format>;base64,<bytes>` with the format in lower case, as Ark documents it; undefined for anything else. */
export function decodeDataUri(value: string): ReceivedImage | undefined {
  const match = /^data:image\/([a-z]+);base64,([A-Za-z0-9+/]*={0,2})$/.exec(value);
  if (!match) return undefined;
  const bytes = Buffer.from(match[2]!, 'base64');
  return { via: 'data-uri', declared: match[1]!, bytes, ...sniff(bytes) };
}

/** Fetches an input URL as the upstream would (no redirects followed); undefined when it serves no 200. */
export async function fetchInputImage(url: string): Promise<ReceivedImage | undefined> {
  try {
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(5000) });
    if (res.status !== 200) return undefined;
    const bytes = Buffer.from(await res.arrayBuffer());
    return { via: 'url', url, bytes, ...sniff(bytes) };
  } catch {
    return undefined;
  }
}
