import { randomBytes } from 'node:crypto';
import { thrownApiError } from '../helpers/thrown-api-error';
import { CursorCodec, type ListIdPrefix } from '../../src/shared/cursor';

const codec = new CursorCodec([randomBytes(32)]);

/** Keyset cursors over (created_at, id), newest first, signed. */
describe('cursors', () => {
  const refusal = (cursor: string, prefix: ListIdPrefix = 'key', by = codec) => thrownApiError(() => by.position(cursor, prefix));
  const raw = (text: string) => Buffer.from(text).toString('base64url');
  const cursorAt = (created_at: number, id: string, prefix: ListIdPrefix) =>
    codec.pageOf(
      [
        { created_at, id },
        { created_at: 0, id: `${prefix}_0` },
      ],
      1,
      prefix,
    ).nextCursor as string;

  it('round-trips a position, for every id prefix', () => {
    for (const [prefix, id] of [
      ['key', 'key_01HX0000AbCdEf'],
      ['gen', 'gen_z9'],
      ['adt', 'adt_1'],
      ['aud', 'aud_Q'],
      ['whd', 'whd_abc123'],
    ] as const) {
      expect(codec.position(cursorAt(1_767_225_600_000, id, prefix), prefix)).toEqual({ createdAt: 1_767_225_600_000, id });
    }
    expect(codec.position(cursorAt(0, 'gen_a', 'gen'), 'gen')).toEqual({ createdAt: 0, id: 'gen_a' });
  });

  it('is URL-safe text that does not show the position in the clear', () => {
    const cursor = cursorAt(1_767_225_600_000, 'key_abc', 'key');
    expect(cursor).toMatch(/^[A-Za-z0-9_.-]+$/);
    expect(cursor).not.toContain('key_abc');
  });

  it('refuses a cursor of another list (another id prefix): 400 invalid_request, param cursor', () => {
    const error = refusal(cursorAt(1, 'gen_abc', 'gen'), 'key');
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, param: 'cursor' });
  });

  it('refuses a cursor whose position or MAC was changed, one signed with another key, and one without a MAC', () => {
    const cursor = cursorAt(5000, 'key_abc', 'key');
    const [payload, mac] = cursor.split('.') as [string, string];
    expect(refusal(`${raw('4000:key_abc')}.${mac}`).param).toBe('cursor');
    expect(refusal(`${payload}.${mac.slice(0, -2)}${mac.endsWith('AA') ? 'BA' : 'AA'}`).param).toBe('cursor');
    expect(refusal(`${payload}.${mac.slice(0, 8)}`).param).toBe('cursor');
    expect(refusal(payload).param).toBe('cursor');
    expect(refusal(cursor, 'key', new CursorCodec([randomBytes(32)])).param).toBe('cursor');
  });

  it('a rotated key list still opens cursors signed with an older key; the newest signs', () => {
    const older = randomBytes(32);
    const cursor = new CursorCodec([older]).seal('key', '7:key_a');
    const rotated = new CursorCodec([randomBytes(32), older]);
    expect(rotated.position(cursor, 'key')).toEqual({ createdAt: 7, id: 'key_a' });
    expect(refusal(rotated.seal('key', '7:key_a'), 'key', new CursorCodec([older])).param).toBe('cursor');
  });

  it.each([
    ['empty', ''],
    ['not base64 of a position', 'hello'],
    ['no time', ':key_a'],
    ['negative time', '-1:key_a'],
    ['fractional time', '1.5:key_a'],
    ['time of 16 digits', `${'9'.repeat(16)}:key_a`],
    ['id without a body', '1:key_'],
    ['id with other characters', '1:key_a-b'],
    ['SQL in the id', "1:key_a' OR '1'='1"],
    ['trailing text', '1:key_a\n'],
    ['leading text', ' 1:key_a'],
    ['prefix only as a substring', '1:xkey_a'],
  ])('refuses %s, even signed', (_name, position) => {
    expect(refusal(position === '' || position === 'hello' ? position : codec.seal('key', position)).param).toBe('cursor');
  });

  it('accepts a time of up to 15 digits', () => {
    expect(codec.position(codec.seal('key', `${'9'.repeat(15)}:key_a`), 'key').createdAt).toBe(999_999_999_999_999);
  });
});

describe('pageOf', () => {
  const rows = [5, 4, 3, 2, 1].map((n) => ({ created_at: n * 1000, id: `gen_${n}` }));

  it('a query answering limit + 1 rows: a page of limit rows and a cursor at its last row', () => {
    const { page, nextCursor } = codec.pageOf(rows, 4, 'gen');
    expect(page.map((row) => row.id)).toEqual(['gen_5', 'gen_4', 'gen_3', 'gen_2']);
    expect(nextCursor).not.toBeNull();
    expect(codec.position(nextCursor as string, 'gen')).toEqual({ createdAt: 2000, id: 'gen_2' });
  });

  it('limit rows or fewer: the last page, no cursor', () => {
    expect(codec.pageOf(rows, 5, 'gen')).toEqual({ page: rows, nextCursor: null });
    expect(codec.pageOf(rows, 10, 'gen')).toEqual({ page: rows, nextCursor: null });
    expect(codec.pageOf([], 10, 'gen')).toEqual({ page: [], nextCursor: null });
  });

  it('does not change the rows it was given', () => {
    const copy = [...rows];
    codec.pageOf(rows, 2, 'gen');
    expect(rows).toEqual(copy);
  });
});
