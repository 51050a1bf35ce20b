import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { randomBase62, toBase62 } from '../shared/ids';

/**
 * Client key format, as GitHub tokens: `hyai_` + 30 random base62 chars (178 bits)
 * + 6 base62 chars of CRC32 over the random part. The checksum lets the gateway refuse
 * typos and garbage without touching the database.
 */
const PREFIX = 'hyai_';
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = /^hyai_[0-9A-Za-z]{36}$/;

function checksum(randomPart: string): string {
  return toBase62(crc32(randomPart), CHECKSUM_LENGTH);
}

export function generateKeySecret(): string {
  const randomPart = randomBase62(RANDOM_LENGTH);
  return PREFIX + randomPart + checksum(randomPart);
}

/** True when the value has the key shape and a matching checksum. */
export function isWellFormedKey(value: string): boolean {
  if (!KEY_PATTERN.test(value)) return false;
  const body = value.slice(PREFIX.length);
  return checksum(body.slice(0, RANDOM_LENGTH)) === body.slice(RANDOM_LENGTH);
}

/** What is stored and looked up: the hex SHA-256 of the key. */
export function hashKey(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Display hint: `hyai_` + first 4 and last 4 characters, enough to tell keys apart. */
export function keyHint(value: string): string {
  return `${value.slice(0, PREFIX.length + 4)}...${value.slice(-4)}`;
}
