import { thrownApiError } from '../helpers/thrown-api-error';
import { decodeCursor, encodeCursor, pageOf } from '../../src/shared/cursor';

/** Opaque keyset cursors over (created_at, id), newest first. */
describe('cursors', () => {
  const refusal = (cursor: string, prefix: 'key' | 'gen' | 'adt' | 'aud' | 'whd' = 'key') => thrownApiError(() => decodeCursor(cursor, prefix));
  const raw = (text: string) => Buffer.from(text).toString('base64url');

  it('round-trips a position, for every id prefix', () => {
    for (const [prefix, id] of [
      ['key', 'key_01HX0000AbCdEf'],
      ['gen', 'gen_z9'],
      ['adt', 'adt_1'],
      ['aud', 'aud_Q'],
      ['whd', 'whd_abc123'],
    ] as const) {
      expect(decodeCursor(encodeCursor({ created_at: 1_767_225_600_000, id }), prefix)).toEqual({ createdAt: 1_767_225_600_000, id });
    }
    expect(decodeCursor(encodeCursor({ created_at: 0, id: 'gen_a' }), 'gen')).toEqual({ createdAt: 0, id: 'gen_a' });
  });

  it('is URL-safe text that does not show the position in the clear', () => {
    const cursor = encodeCursor({ created_at: 1_767_225_600_000, id: 'key_abc' });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor).not.toContain('key_abc');
  });

  it('refuses a cursor of another list (another id prefix): 400 invalid_request, param cursor', () => {
    const error = refusal(encodeCursor({ created_at: 1, id: 'gen_abc' }), 'key');
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'cursor', message: 'cursor is not one this API returned.' });
  });

  it.each([
    ['empty', ''],
    ['not base64 of a position', 'hello'],
    ['no time', raw(':key_a')],
    ['negative time', raw('-1:key_a')],
    ['fractional time', raw('1.5:key_a')],
    ['time of 16 digits', raw(`${'9'.repeat(16)}:key_a`)],
    ['id without a body', raw('1:key_')],
    ['id with other characters', raw('1:key_a-b')],
    ['SQL in the id', raw("1:key_a' OR '1'='1")],
    ['trailing text', raw('1:key_a\n')],
    ['leading text', raw(' 1:key_a')],
    ['prefix only as a substring', raw('1:xkey_a')],
  ])('refuses %s', (_name, cursor) => {
    expect(refusal(cursor).param).toBe('cursor');
  });

  it('accepts a time of up to 15 digits', () => {
    expect(decodeCursor(raw(`${'9'.repeat(15)}:key_a`), 'key').createdAt).toBe(999_999_999_999_999);
  });
});

describe('pageOf', () => {
  const rows = [5, 4, 3, 2, 1].map((n) => ({ created_at: n * 1000, id: `gen_${n}` }));

  it('a query answering limit + 1 rows: a page of limit rows and a cursor at its last row', () => {
    const { page, nextCursor } = pageOf(rows, 4);
    expect(page.map((row) => row.id)).toEqual(['gen_5', 'gen_4', 'gen_3', 'gen_2']);
    expect(nextCursor).not.toBeNull();
    expect(decodeCursor(nextCursor as string, 'gen')).toEqual({ createdAt: 2000, id: 'gen_2' });
  });

  it('limit rows or fewer: the last page, no cursor', () => {
    expect(pageOf(rows, 5)).toEqual({ page: rows, nextCursor: null });
    expect(pageOf(rows, 10)).toEqual({ page: rows, nextCursor: null });
    expect(pageOf([], 10)).toEqual({ page: [], nextCursor: null });
  });

  it('does not change the rows it was given', () => {
    const copy = [...rows];
    pageOf(rows, 2);
    expect(rows).toEqual(copy);
  });
});
