import fc from 'fast-check';
import { LinearPattern, MAX_PATTERN_STATES, PatternError, PatternSet, type StepMeter, codePoints } from '../../src/guardrails/linear-regex';
import { foldText } from '../../src/guardrails/text-fold';

/**
 * The linear-time matcher of prompt-rule patterns (src/guardrails/linear-regex.ts): it agrees with
 * V8's own engine on the syntax it takes (short inputs, where V8's backtracking is harmless), it
 * refuses what it cannot match in linear time, and its work on a 64 KiB adversarial prompt is
 * bounded by prompt length × states, counted in steps.
 */

const compileError = (source: string): string | undefined => {
  try {
    LinearPattern.compile(source);
    return undefined;
  } catch (error) {
    if (!(error instanceof PatternError)) throw error;
    return error.message;
  }
};
const search = (source: string, text: string) => LinearPattern.compile(source).search(codePoints(foldText(text)));

/** Patterns over a small alphabet, from the syntax the matcher takes (and some it refuses). */
const patternArbitrary: fc.Arbitrary<string> = fc.letrec<{ alt: string; seq: string; term: string; atom: string }>((tie) => ({
  alt: fc.array(tie('seq'), { minLength: 1, maxLength: 3 }).map((options) => options.join('|')),
  seq: fc.array(tie('term'), { minLength: 0, maxLength: 4 }).map((items) => items.join('')),
  term: fc
    .tuple(tie('atom'), fc.constantFrom('', '', '*', '+', '?', '{2}', '{0,2}', '{1,}', '*?', '+?', '{1,3}?'))
    .map(([atom, quantifier]) => atom + quantifier),
  atom: fc.oneof(
    {
      weight: 6,
      arbitrary: fc.constantFrom('a', 'b', 'c', '1', ' ', '.', '[ab]', '[^a]', '[a-c1]', '\\d', '\\w', '\\s', '\\W', '\\x61', '\\u0062', '\\.', '[\\d ]'),
    },
    { weight: 1, arbitrary: fc.constantFrom('^', '$', '\\b', '\\B') },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom('(', '(?:'), tie('alt')).map(([open, inner]) => `${open}${inner})`) },
  ),
})).alt;
const inputArbitrary = fc.string({ unit: fc.constantFrom('a', 'b', 'c', '1', ' ', '.', '\n'), maxLength: 12 });

/** V8's answer, or 'refused' when V8 refuses the pattern in `u` mode. */
function v8(source: string, input: string, whole: boolean): boolean | 'refused' {
  let re: RegExp;
  try {
    re = new RegExp(whole ? `^(?:${source})$` : source, 'u');
  } catch {
    return 'refused';
  }
  return re.test(input);
}

describe('LinearPattern against V8', () => {
  it('matches anywhere exactly where V8 does, and refuses exactly what V8 refuses in u mode', () => {
    fc.assert(
      fc.property(patternArbitrary, inputArbitrary, (source, input) => {
        // The state bound is the matcher's own limit, not a syntax V8 refuses.
        fc.pre(!compileError(source)?.includes('too large'));
        const expected = v8(source, input, false);
        if (expected === 'refused') return compileError(source) !== undefined;
        return LinearPattern.compile(source).search(codePoints(input)) === expected;
      }),
      { numRuns: 1500 },
    );
  });

  it('matches the whole text exactly where V8 matches ^(?:…)$', () => {
    fc.assert(
      fc.property(patternArbitrary, inputArbitrary, (source, input) => {
        const expected = v8(source, input, true);
        fc.pre(expected !== 'refused' && !compileError(source)?.includes('too large'));
        return LinearPattern.compile(source).matchesWhole(codePoints(input)) === expected;
      }),
      { numRuns: 1500 },
    );
  });
});

describe('PatternSet: several patterns as one lazily built DFA', () => {
  const usable = fc.array(patternArbitrary, { minLength: 1, maxLength: 4 }).filter((sources) => sources.every((source) => compileError(source) === undefined));
  /** The lowest index of the patterns V8 finds in `input` (whole: that match all of it), at the first position any does; -1 for none. */
  const firstByV8 = (sources: string[], input: string, whole: boolean): number => {
    if (whole) return sources.findIndex((source) => v8(source, input, true) === true);
    for (let end = 0; end <= input.length; end += 1) {
      const found = sources.findIndex((source) => v8(`(?:${source})(?<=^[^]{${end}})`, input, false) === true);
      if (found >= 0) return found;
    }
    return -1;
  };

  it('answers what each pattern alone answers, warm or cold, searching or matching whole', () => {
    fc.assert(
      fc.property(usable, fc.array(inputArbitrary, { minLength: 1, maxLength: 4 }), fc.boolean(), (sources, inputs, whole) => {
        const set = new PatternSet(
          sources.map((source) => LinearPattern.compile(source)),
          whole,
        );
        // The same set over several texts: later runs reuse (and extend) the states the earlier ones built.
        return inputs.every((input) => set.run(input, { steps: 0 }) === firstByV8(sources, input, whole));
      }),
      { numRuns: 1500 },
    );
  });
});

describe('LinearPattern syntax', () => {
  it.each([
    ['(a)\\1', 'backreferences'],
    ['(?<x>a)\\k<x>', 'backreferences'],
    ['a(?=b)', 'lookaround'],
    ['a(?!b)', 'lookaround'],
    ['(?<=a)b', 'lookaround'],
    ['(?<!a)b', 'lookaround'],
    ['a{101}', 'above 100'],
    ['a{3,2}', 'm below n'],
    ['a**', 'nothing to repeat'],
    ['^*', 'assertion cannot be repeated'],
    ['(a', 'missing ")"'],
    ['a)', 'unmatched ")"'],
    ['[a', 'missing "]"'],
    ['[z-a]', 'out of order'],
    ['[\\d-z]', 'cannot bound a range'],
    ['\\q', 'unknown escape'],
    ['\\p{NoSuchProperty}', 'unknown Unicode property'],
    ['(?i)a', 'unsupported group'],
    ['(?<n>a)(?<n>b)', 'a second group named'],
    ['(?<1>a)', 'must be an identifier'],
    ['x{', 'lone "{"'],
    ['((a{100}){100}){100}', 'too large'],
  ])('refuses %s (%s)', (source, reason) => {
    expect(compileError(source)).toContain(reason);
  });

  it('matches case-, width- and accent-insensitively: the pattern and the prompt are folded alike', () => {
    expect(search('bad word', 'a ＢＡＤ Word here')).toBe(true);
    expect(search('café', 'CAFE\u0301')).toBe(true);
    expect(search('[A-Z]{3}', 'abc')).toBe(true);
    expect(search('straße', 'STRASSE')).toBe(true);
    expect(search('\\p{Lu}', 'ABC')).toBe(false);
    expect(search('\\bcat\\b', 'concatenate')).toBe(false);
    expect(search('(?<animal>cat|dog)s?', 'Dogs')).toBe(true);
  });

  it('bounds a pattern by its compiled states', () => {
    expect(compileError('a{100}'.repeat(Math.floor(MAX_PATTERN_STATES / 100) - 1))).toBeUndefined();
    expect(compileError('a{100}'.repeat(Math.floor(MAX_PATTERN_STATES / 100) + 1))).toContain('too large');
  });
});

describe('LinearPattern work', () => {
  const SIZE = 64 * 1024;
  /** Prompts that make backtracking engines explode on the patterns below: long runs that almost match. */
  const UNITS = ['a', 'ab', 'a ', ' ', '1a', 'aab', 'a\n'];
  const long = (unit: string) => codePoints(unit.repeat(Math.ceil(SIZE / unit.length)).slice(0, SIZE) + '!');
  const adversarial = fc.constantFrom(...UNITS).map(long);
  const bounded = (pattern: LinearPattern, text: readonly number[], run: (meter: StepMeter) => boolean) => {
    const meter = { steps: 0 };
    run(meter);
    // Each state is visited at most once per position and each listed state tests one character.
    return meter.steps <= 2 * pattern.stateCount * (text.length + 1);
  };

  it.each(['(a+)+$', '(a|a)*b', '(a|aa)+$', '(.*a){20}', '\\s+x', '\\w*\\w*\\w*$', '(a*)*b', '^(a?){25}a{25}$', '(\\w+\\s?)+$'])(
    'checks 64 KiB against the classic catastrophic pattern %s within prompt length × states steps',
    (source) => {
      const pattern = LinearPattern.compile(source);
      for (const text of UNITS.map(long)) {
        expect(bounded(pattern, text, (meter) => pattern.search(text, meter))).toBe(true);
        expect(bounded(pattern, text, (meter) => pattern.matchesWhole(text, meter))).toBe(true);
      }
    },
  );

  it('checks 64 KiB against every accepted generated pattern within prompt length × states steps', () => {
    fc.assert(
      fc.property(patternArbitrary, adversarial, (source, text) => {
        fc.pre(compileError(source) === undefined);
        const pattern = LinearPattern.compile(source);
        return bounded(pattern, text, (meter) => pattern.search(text, meter)) && bounded(pattern, text, (meter) => pattern.matchesWhole(text, meter));
      }),
      { numRuns: 40 },
    );
  });
});
