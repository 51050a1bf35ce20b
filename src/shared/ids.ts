import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// CSPRNG bytes drawn 4 KiB at a time: one randomBytes call per id was measurable per request.
let pool = Buffer.alloc(0);
let poolOffset = 0;

function randomByte(): number {
  if (poolOffset >= pool.length) {
    pool = randomBytes(4096);
    poolOffset = 0;
  }
  return pool[poolOffset++] as number;
}

/** `length` uniformly random base62 characters (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    // 248 = 4 * 62: bytes above it would bias the distribution.
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

/** Non-negative integer to base62, left-padded with '0' to `width`. */
export function toBase62(value: number, width: number): string {
  let out = '';
  let rest = value;
  do {
    out = BASE62[rest % 62] + out;
    rest = Math.floor(rest / 62);
  } while (rest > 0);
  return out.padStart(width, '0');
}

/** Prefixed resource id such as `key_...` or `req_...` (22 chars = 131 random bits). */
export function newId(prefix: 'key' | 'req' | 'adt' | 'chn' | 'prj'): string {
  return `${prefix}_${randomBase62(22)}`;
}

/**
 * Prefixed id that sorts by creation time, for rows written on every request (`gen_...`): 8 chars of
 * epoch milliseconds, then 14 random (83 bits). New rows land at the end of the primary-key index
 * instead of on a random page of it.
 */
export function newSortableId(prefix: 'gen' | 'aud' | 'img', nowMs: number): string {
  return `${prefix}_${toBase62(nowMs, 8)}${randomBase62(14)}`;
}
