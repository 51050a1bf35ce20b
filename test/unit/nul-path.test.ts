import fc from 'fast-check';
import { pathOfNul } from '../../src/http/base-app';

/** Where a JSON body holds a NUL character (refused: PostgreSQL text cannot store it). */
describe('pathOfNul', () => {
  it('names the first string or member name holding NUL as a path (`images[1]`, `extra.note`)', () => {
    expect(pathOfNul('a\u0000b')).toBe('');
    expect(pathOfNul({ prompt: 'ok', extra: { note: 'x\u0000' } })).toBe('extra.note');
    expect(pathOfNul({ images: ['fine', 'bad\u0000'] })).toBe('images[1]');
    expect(pathOfNul({ rules: [{ ok: 'x' }, { term: 'y\u0000' }] })).toBe('rules[1].term');
    expect(pathOfNul({ 'na\u0000me': 1 })).toBe('na\u0000me');
    expect(pathOfNul({ a: { 'b\u0000': 'c' } })).toBe('a.b\u0000');
    expect(pathOfNul({ prompt: 'a lighthouse', n: 2, size: null, tags: [1, true, { x: 'y' }] })).toBeUndefined();
  });

  it('finds a NUL put anywhere in a JSON value: following the path reaches a string holding one', () => {
    // Member names that a path can name unambiguously: not empty, no dot or bracket.
    const plainNames = (node: unknown): boolean =>
      node === null || typeof node !== 'object' || Object.entries(node).every(([name, member]) => name !== '' && !/[.[\]]/.test(name) && plainNames(member));
    const withoutNul = fc.jsonValue().filter((value) => !JSON.stringify(value).includes('\\u0000') && plainNames(value));
    fc.assert(
      fc.property(withoutNul, fc.nat(), (value, pick) => {
        // Put a NUL into one of the strings reachable from value (or make value one).
        const paths: string[][] = [];
        const collect = (node: unknown, at: string[]) => {
          if (typeof node === 'string') paths.push(at);
          else if (node !== null && typeof node === 'object') for (const [name, member] of Object.entries(node)) collect(member, [...at, name]);
        };
        collect(value, []);
        if (paths.length === 0) return expect(pathOfNul(value)).toBeUndefined();
        const target = paths[pick % paths.length] as string[];
        const poisoned = structuredClone(value) as Record<string, unknown>;
        let holder: Record<string, unknown> = { root: poisoned };
        let name = 'root';
        for (const step of target) {
          holder = holder[name] as Record<string, unknown>;
          name = step;
        }
        holder[name] = `${holder[name] as string}\u0000`;
        const root = target.length === 0 ? `${value as string}\u0000` : poisoned;
        const found = pathOfNul(root) as string;
        expect(found).toBeDefined();
        const reached =
          found === ''
            ? root
            : found
                .split(/[.[\]]/)
                .filter(Boolean)
                .reduce<unknown>((node, step) => (node as Record<string, unknown>)[step], root);
        expect(typeof reached === 'string' && reached.includes('\u0000')).toBe(true);
      }),
    );
  });
});
