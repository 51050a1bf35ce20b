import { newId, newSortableId } from '../../src/shared/ids';

describe('resource ids', () => {
  it('are prefixed and base62, as the spec patterns say', () => {
    expect(newId('key')).toMatch(/^key_[0-9A-Za-z]{22}$/);
    expect(newSortableId('gen', Date.now())).toMatch(/^gen_[0-9A-Za-z]{22}$/);
  });

  it('sort by creation time when sortable, whatever their random part', () => {
    const times = [0, 1, 61, 62, 3_843, 1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000];
    const ids = times.map((t) => newSortableId('gen', t));
    // Plain code-unit order: how SQLite compares the primary key (base62 digits are in ASCII order).
    expect([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(ids);
  });

  it('do not repeat', () => {
    const now = Date.now();
    const ids = new Set(Array.from({ length: 10_000 }, () => newSortableId('gen', now)));
    expect(ids.size).toBe(10_000);
  });
});
