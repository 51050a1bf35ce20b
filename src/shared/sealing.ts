import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Secrets the gateway must read back (channel credentials, webhook signing secrets, ...) at rest:
 * AES-256-GCM under the configured sealing keys (CHANNEL_SEALING_KEY, newest first).
 * Sealed form: `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url), where the key id is the first
 * 8 hex characters of the key's SHA-256, so opening picks the right key after a rotation.
 * A context string (the owning row's id, e.g. `chn_...` or `webhook_endpoint:whep_...`) is bound as
 * additional data: a sealed value copied to another row, or to another kind of secret, does not open.
 */
export class Sealer {
  private readonly keys: Array<{ id: string; key: Buffer }>;

  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new Error('at least one sealing key is needed');
    this.keys = keys.map((key) => ({ id: createHash('sha256').update(key).digest('hex').slice(0, 8), key }));
  }

  seal(context: string, plaintext: string): string {
    const { id, key } = this.keys[0]!;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(context));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', id, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  open(context: string, sealed: string): string {
    const [version, keyId, iv, tag, ciphertext] = sealed.split('.');
    const entry = this.keys.find((k) => k.id === keyId);
    if (version !== 'v1' || !entry || iv === undefined || tag === undefined || ciphertext === undefined) {
      throw new Error(`${context}: sealed with a key that is not configured (key id ${keyId ?? '?'})`);
    }
    const decipher = createDecipheriv('aes-256-gcm', entry.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  }

  /** True when `sealed` is in the sealed form at all (a value stored before sealing is not). */
  static isSealed(value: string): boolean {
    return /^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(value);
  }

  /** True when `sealed` was sealed with an older key and should be sealed again with the newest. */
  isStale(sealed: string): boolean {
    return sealed.split('.')[1] !== this.keys[0]!.id;
  }
}
