import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { randomBase62, toBase62 } from '../shared/ids';

/**
 * Secret format shared by client keys (`hyai_`) and admin tokens (`hyadm_`), as GitHub tokens:
 * prefix + 30 random base62 chars (178 bits) + 6 base62 chars of CRC32 over the random part. The
 * checksum lets the gateway refuse typos and garbage without touching the database.
 */
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;

export interface SecretFormat {
  generate(): string;
  /** True when the value has the shape and a matching checksum. */
  isWellFormed(value: string): boolean;
  /** Display hint: prefix + first 4 and last 4 characters, enough to tell secrets apart. */
  hint(value: string): string;
}

function checksum(randomPart: string): string {
  return toBase62(crc32(randomPart), CHECKSUM_LENGTH);
}

export function prefixedSecretFormat(prefix: string): SecretFormat {
  const pattern = new RegExp(`^${prefix}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);
  return {
    generate() {
      const randomPart = randomBase62(RANDOM_LENGTH);
      return prefix + randomPart + checksum(randomPart);
    },
    isWellFormed(value) {
      if (!pattern.test(value)) return false;
      const body = value.slice(prefix.length);
      return checksum(body.slice(0, RANDOM_LENGTH)) === body.slice(RANDOM_LENGTH);
    },
    hint: (value) => `${value.slice(0, prefix.length + 4)}...${value.slice(-4)}`,
  };
}

const clientKeys = prefixedSecretFormat('hyai_');

export function generateKeySecret(): string {
  return clientKeys.generate();
}

/** True when the value has the key shape and a matching checksum. */
export function isWellFormedKey(value: string): boolean {
  return clientKeys.isWellFormed(value);
}

/** What is stored and looked up: the hex SHA-256 of the secret (keys and admin tokens alike). */
export function hashKey(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Display hint: `hyai_` + first 4 and last 4 characters, enough to tell keys apart. */
export function keyHint(value: string): string {
  return clientKeys.hint(value);
}
