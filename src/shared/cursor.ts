import { ApiError } from '../errors/api-error';

/** Opaque keyset cursor over (created_at, id), for lists ordered newest first. */
export function encodeCursor(position: { created_at: number; id: string }): string {
  return Buffer.from(`${position.created_at}:${position.id}`).toString('base64url');
}

export function decodeCursor(cursor: string, idPrefix: 'key' | 'gen' | 'adt' | 'aud' | 'whd'): { createdAt: number; id: string } {
  const match = new RegExp(`^(\\d{1,15}):(${idPrefix}_[0-9A-Za-z]+)$`).exec(Buffer.from(cursor, 'base64url').toString());
  if (!match) throw new ApiError('invalid_request', 'cursor is not one this API returned.', { param: 'cursor' });
  return { createdAt: Number(match[1]), id: match[2] as string };
}

/** Splits the `limit + 1` rows a list query returned into a page and the next cursor. */
export function pageOf<Row extends { created_at: number; id: string }>(rows: Row[], limit: number): { page: Row[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { page, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}
