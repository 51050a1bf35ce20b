import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../errors/api-error';

/** Bytes of HMAC-SHA256 a cursor carries: 128 bits, beyond guessing. */
const MAC_BYTES = 16;

/** The id prefixes of the lists ordered newest first by (created_at, id). */
export type ListIdPrefix = 'key' | 'gen' | 'adt' | 'aud' | 'whd' | 'prj';

/** What every cursor refusal says: the list's own position errors and a failed MAC read alike. */
export function invalidCursor(): ApiError {
  return new ApiError('invalid_request', 'cursor: not one this API returned (for these parameters).', { param: 'cursor' });
}

/**
 * Page cursors of every list, tamper-evident: `<payload>.<mac>` (base64url), the MAC an HMAC-SHA256
 * over the cursor's kind and payload. A cursor the API did not issue (edited, forged, from another
 * list or another gateway) is a 400 before any of it reaches a query. The MAC key is derived (HKDF)
 * from the channel sealing keys, which every replica already shares (CHANNEL_SEALING_KEY; outside
 * production generated into the data directory): the newest signs, any configured one verifies,
 * so cursors keep working across replicas and through a key rotation.
 */
export class CursorCodec {
  private readonly keys: Buffer[];

  constructor(sealingKeys: readonly Buffer[]) {
    if (sealingKeys.length === 0) throw new Error('at least one key is needed to sign cursors');
    this.keys = sealingKeys.map((secret) => Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'creative-gateway page cursor v1', 32)));
  }

  /** `payload` signed as a cursor of `kind` (a list's own name: a cursor of one list does not open another). */
  seal(kind: string, payload: string): string {
    return `${Buffer.from(payload).toString('base64url')}.${this.mac(this.keys[0] as Buffer, kind, payload).toString('base64url')}`;
  }

  /** The payload of a cursor this API issued for `kind`; 400 `invalid_request` (param `cursor`) for any other. */
  open(kind: string, cursor: string): string {
    const match = /^([A-Za-z0-9_-]*)\.([A-Za-z0-9_-]+)$/.exec(cursor);
    if (!match) throw invalidCursor();
    const payload = Buffer.from(match[1] as string, 'base64url').toString();
    const given = Buffer.from(match[2] as string, 'base64url');
    const issued = given.length === MAC_BYTES && this.keys.some((key) => timingSafeEqual(this.mac(key, kind, payload), given));
    if (!issued) throw invalidCursor();
    return payload;
  }

  /** The position of a (created_at, id) list cursor whose ids start with `idPrefix`. */
  position(cursor: string, idPrefix: ListIdPrefix): { createdAt: number; id: string } {
    const match = new RegExp(`^(\\d{1,15}):(${idPrefix}_[0-9A-Za-z]+)$`).exec(this.open(idPrefix, cursor));
    if (!match) throw invalidCursor();
    return { createdAt: Number(match[1]), id: match[2] as string };
  }

  /** Splits the `limit + 1` rows a newest-first list query returned into a page and the next cursor. */
  pageOf<Row extends { created_at: number; id: string }>(rows: Row[], limit: number, idPrefix: ListIdPrefix): { page: Row[]; nextCursor: string | null } {
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { page, nextCursor: rows.length > limit && last ? this.seal(idPrefix, `${last.created_at}:${last.id}`) : null };
  }

  private mac(key: Buffer, kind: string, payload: string): Buffer {
    return createHmac('sha256', key).update(`${kind}\n${payload}`).digest().subarray(0, MAC_BYTES);
  }
}
