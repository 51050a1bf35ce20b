import fc from 'fast-check';
import {
  CompiledPromptRules,
  PROMPT_RULE_LIMITS,
  type PromptRule,
  checkPrompt,
  mergePromptRules,
  validatePromptRules,
} from '../../src/guardrails/prompt-rules';
import { LinearPattern } from '../../src/guardrails/linear-regex';
import { foldText } from '../../src/guardrails/text-fold';

/** Prompt rules (src/guardrails/prompt-rules.ts): validation as an admin sets them, composition, and checks. */

const valid = (input: unknown): PromptRule[] => {
  const result = validatePromptRules(input);
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.rules;
};
const errorsOf = (input: unknown) => {
  const result = validatePromptRules(input);
  return result.ok ? [] : result.errors;
};

describe('validatePromptRules', () => {
  it('gives every rule a gr_ id, keeps the ones given, and returns the rules as set', () => {
    const rules = valid([
      { kind: 'max_length', max: 500 },
      { id: 'gr_no_celebrities', kind: 'blocked_term', term: 'Famous Person' },
      { kind: 'blocked_pattern', pattern: '\\bnsfw\\b' },
      { kind: 'allow_list', patterns: ['a (cat|dog) on a \\w+', 'product shot of .+'] },
    ]);
    expect(rules.map((rule) => rule.kind)).toEqual(['max_length', 'blocked_term', 'blocked_pattern', 'allow_list']);
    expect(rules[1]).toEqual({ id: 'gr_no_celebrities', kind: 'blocked_term', term: 'Famous Person' });
    for (const rule of rules) expect(rule.id).toMatch(/^gr_[A-Za-z0-9_]+$/);
    expect(new Set(rules.map((rule) => rule.id)).size).toBe(4);
    expect(valid([])).toEqual([]);
  });

  it('reports each problem against its field', () => {
    expect(errorsOf({})).toEqual([{ param: 'prompt_rules', message: 'must be an array of rules' }]);
    const errors = errorsOf([
      { kind: 'max_length', max: 0 },
      { kind: 'max_length', max: 10 },
      { kind: 'blocked_term', term: '' },
      { kind: 'blocked_term', term: '\u200b\u00ad\u0301' },
      { kind: 'blocked_term', term: 'x'.repeat(PROMPT_RULE_LIMITS.termLength + 1) },
      { kind: 'blocked_pattern', pattern: '(a)\\1' },
      { kind: 'blocked_pattern', pattern: 'x(?=y)' },
      { kind: 'allow_list', patterns: ['ok', '(unclosed'] },
      { kind: 'allow_list', patterns: [] },
      { kind: 'blocked_term', term: 'a', id: 'key_1' },
      { kind: 'blocked_term', term: 'a', id: 'gr_same' },
      { kind: 'blocked_term', term: 'b', id: 'gr_same' },
      { kind: 'blocked_term', term: 'c', pattern: 'c' },
      { kind: 'regex', pattern: 'c' },
      'not a rule',
    ]);
    const byParam = Object.fromEntries(errors.map((error) => [error.param, error.message]));
    expect(byParam).toEqual({
      'prompt_rules[0].max': expect.stringContaining('integer from 1'),
      'prompt_rules[1].kind': 'a set has at most one max_length rule',
      'prompt_rules[2].term': expect.stringContaining('1 to 200 characters'),
      'prompt_rules[3].term': expect.stringContaining('is empty once'),
      'prompt_rules[4].term': expect.stringContaining('1 to 200 characters'),
      'prompt_rules[5].pattern': expect.stringContaining('backreferences are not supported'),
      'prompt_rules[6].pattern': expect.stringContaining('lookaround assertions are not supported'),
      'prompt_rules[7].patterns[1]': expect.stringContaining('missing ")"'),
      'prompt_rules[8].kind': 'a set has at most one allow_list rule',
      'prompt_rules[8].patterns': expect.stringContaining('1 to 100 patterns'),
      'prompt_rules[9].id': expect.stringContaining('must be gr_'),
      'prompt_rules[11].id': 'is used by another rule of the set',
      'prompt_rules[12].pattern': 'is not a field of a blocked_term rule',
      'prompt_rules[13].kind': expect.stringContaining('must be one of'),
      'prompt_rules[14]': 'must be an object',
    });
  });

  it('refuses a set whose patterns together compile to too many states', () => {
    const rules = Array.from({ length: 60 }, () => ({ kind: 'blocked_pattern', pattern: 'a{100}b{100}c{100}d{100}' }));
    expect(errorsOf(rules)).toEqual([{ param: 'prompt_rules', message: expect.stringContaining(`at most ${PROMPT_RULE_LIMITS.setStates}`) }]);
  });

  it('names the field under the prefix given', () => {
    expect(errorsOf([])).toEqual([]);
    const result = validatePromptRules([{ kind: 'max_length', max: -1 }], 'guardrails.prompt_rules');
    expect(result.ok ? [] : result.errors.map((error) => error.param)).toEqual(['guardrails.prompt_rules[0].max']);
  });
});

describe('checkPrompt', () => {
  const rules = valid([
    { id: 'gr_len', kind: 'max_length', max: 40 },
    { id: 'gr_term', kind: 'blocked_term', term: 'Secret Project' },
    { id: 'gr_pattern', kind: 'blocked_pattern', pattern: '\\b(?:nsfw|gore)\\b' },
  ]);

  it('refuses with the rule id and kind, never the text that matched', () => {
    const refusal = checkPrompt(rules, 'a poster for ＳＥＣＲＥＴ ｐｒｏｊｅｃｔ');
    expect(refusal).toEqual({ allowed: false, ruleId: 'gr_term', kind: 'blocked_term' });
    expect(Object.keys(refusal).sort()).toEqual(['allowed', 'kind', 'ruleId']);
    expect(checkPrompt(rules, 'something NSFW.')).toEqual({ allowed: false, ruleId: 'gr_pattern', kind: 'blocked_pattern' });
    expect(checkPrompt(rules, 'a'.repeat(41))).toEqual({ allowed: false, ruleId: 'gr_len', kind: 'max_length' });
    expect(checkPrompt(rules, 'a red bicycle in the rain')).toEqual({ allowed: true });
  });

  it('counts the maximum length in code points of the prompt as sent', () => {
    const length = valid([{ id: 'gr_len', kind: 'max_length', max: 3 }]);
    expect(checkPrompt(length, '🎨🎨🎨')).toEqual({ allowed: true });
    expect(checkPrompt(length, '🎨🎨🎨🎨')).toMatchObject({ allowed: false, ruleId: 'gr_len' });
  });

  it('sees through invisible characters, decomposed accents and compatibility forms', () => {
    const terms = valid([{ id: 'gr_t', kind: 'blocked_term', term: 'café noir' }]);
    for (const prompt of ['CAFE\u0301 NOIR', 'ca\u200bfé n\u00adoir', 'ｃａｆé ｎｏｉｒ', 'cafe noir']) {
      expect(checkPrompt(terms, prompt)).toEqual({ allowed: false, ruleId: 'gr_t', kind: 'blocked_term' });
    }
  });

  it('in allow-list mode, lets through only prompts one pattern matches whole', () => {
    const allow = valid([{ id: 'gr_allow', kind: 'allow_list', patterns: ['a (cat|dog) on a \\w+', 'logo for [a-z]+'] }]);
    expect(checkPrompt(allow, 'A Dog on a sofa')).toEqual({ allowed: true });
    expect(checkPrompt(allow, 'logo for acme')).toEqual({ allowed: true });
    expect(checkPrompt(allow, 'logo for acme, and also something else')).toEqual({ allowed: false, ruleId: 'gr_allow', kind: 'allow_list' });
    expect(checkPrompt(allow, 'a horse on a hill')).toEqual({ allowed: false, ruleId: 'gr_allow', kind: 'allow_list' });
  });
});

describe('mergePromptRules', () => {
  it('keeps the stricter maximum length, whichever side sets it', () => {
    const project = valid([{ id: 'gr_p', kind: 'max_length', max: 100 }]);
    const key = valid([{ id: 'gr_k', kind: 'max_length', max: 50 }]);
    expect(mergePromptRules(project, key)).toEqual([{ id: 'gr_k', kind: 'max_length', max: 50 }]);
    expect(mergePromptRules(key, project)).toEqual([{ id: 'gr_k', kind: 'max_length', max: 50 }]);
    expect(mergePromptRules(project, valid([{ id: 'gr_k', kind: 'max_length', max: 100 }]))).toEqual([{ id: 'gr_p', kind: 'max_length', max: 100 }]);
    expect(mergePromptRules([], key)).toEqual(key);
  });

  it("adds the key's blocked terms and patterns to the project's", () => {
    const merged = mergePromptRules(
      valid([{ id: 'gr_p', kind: 'blocked_term', term: 'alpha' }]),
      valid([{ id: 'gr_k', kind: 'blocked_pattern', pattern: 'beta\\d' }]),
    );
    expect(checkPrompt(merged, 'ALPHA')).toMatchObject({ ruleId: 'gr_p' });
    expect(checkPrompt(merged, 'beta7')).toMatchObject({ ruleId: 'gr_k' });
    expect(checkPrompt(merged, 'gamma')).toEqual({ allowed: true });
  });

  it("narrows with a key's allow-list: a prompt must pass both", () => {
    const project = valid([{ id: 'gr_pa', kind: 'allow_list', patterns: ['a (cat|dog)'] }]);
    const key = valid([{ id: 'gr_ka', kind: 'allow_list', patterns: ['a (cat|horse)'] }]);
    const merged = mergePromptRules(project, key);
    expect(checkPrompt(merged, 'a cat')).toEqual({ allowed: true });
    expect(checkPrompt(merged, 'a dog')).toEqual({ allowed: false, ruleId: 'gr_ka', kind: 'allow_list' });
    expect(checkPrompt(merged, 'a horse')).toEqual({ allowed: false, ruleId: 'gr_pa', kind: 'allow_list' });
  });
});

describe('prompt rules, properties', () => {
  /** Letters of several scripts, with the look-alike spellings a prompt could use for each. */
  const VARIANTS: Record<string, string[]> = {
    a: ['a', 'A', 'ａ', 'Ａ'],
    e: ['e', 'E', 'ｅ', 'Ｅ'],
    s: ['s', 'S', 'ｓ', 'ſ'],
    k: ['k', 'K', 'ｋ', '\u212a'],
    o: ['o', 'O', 'ｏ', 'Ｏ'],
    '7': ['7', '７', '⁷'],
    é: ['é', 'É', 'e\u0301', 'E\u0301', 'ｅ\u0301'],
    ñ: ['ñ', 'Ñ', 'n\u0303', 'N\u0303'],
    ß: ['ß', 'ss', 'SS', 'ẞ'],
    σ: ['σ', 'Σ', 'ς'],
    д: ['д', 'Д'],
    カ: ['カ', 'ｶ'],
    猫: ['猫'],
    ' ': [' ', '\u3000'],
  };
  const termArbitrary = fc
    .array(fc.constantFrom(...Object.keys(VARIANTS)), { minLength: 1, maxLength: 10 })
    .map((chars) => chars.join(''))
    .filter((term) => term.trim() !== '');
  /** The term spelled with random look-alikes, invisible characters slipped between letters. */
  const disguised = (term: string) =>
    fc
      .tuple(
        ...Array.from(term, (char) => fc.tuple(fc.constantFrom(...(VARIANTS[char] as string[])), fc.constantFrom('', '', '', '\u200b', '\u00ad', '\u2060'))),
      )
      .map((parts) => parts.map(([variant, invisible]) => variant + invisible).join(''));
  const anyText = fc.string({ unit: 'binary', maxLength: 40 });

  // Planes 0 to 3 and the tags block: the rest of Unicode is unassigned or private use, and folds to itself.
  it('folding is idempotent on every single code point that has a folding', () => {
    const unstable: number[] = [];
    for (let cp = 0; cp <= 0xe0fff; cp += 1) {
      if ((cp >= 0xd800 && cp <= 0xdfff) || (cp > 0x3ffff && cp < 0xe0000)) continue;
      const once = foldText(String.fromCodePoint(cp));
      if (foldText(once) !== once) unstable.push(cp);
    }
    expect(unstable).toEqual([]);
  });

  it('folding is idempotent on any text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (text) => foldText(foldText(text)) === foldText(text)),
      { numRuns: 5000 },
    );
  });

  it('refuses a blocked term anywhere in the prompt, in any case, width or accent spelling', () => {
    fc.assert(
      fc.property(
        termArbitrary.chain((term) => fc.tuple(fc.constant(term), disguised(term))),
        anyText,
        anyText,
        ([term, spelled], before, after) => {
          // A combining mark right after the term makes another letter of its last one: not the term.
          fc.pre(!/^\p{M}/u.test(after));
          const rules = valid([{ id: 'gr_t', kind: 'blocked_term', term }]);
          const result = checkPrompt(rules, before + spelled + after);
          return result.allowed === false && result.ruleId === 'gr_t';
        },
      ),
      { numRuns: 2000 },
    );
  });

  /** Allow-list patterns over words, and prompts built from them (and from other words). */
  const WORDS = ['cat', 'dog', 'red', 'blue', 'logo', 'sky'];
  const allowPattern = fc
    .array(fc.oneof(fc.constantFrom(...WORDS), fc.constantFrom('(cat|dog)', '\\w+', '[a-z]{2,4}', '(red )?', '\\d*')), { minLength: 1, maxLength: 4 })
    .map((parts) => parts.join(' '));
  const promptOfWords = fc
    .array(fc.constantFrom(...WORDS, 'ＣＡＴ', 'Dog', '42', 'zebra', '', 'ŕed'), { minLength: 1, maxLength: 5 })
    .map((words) => words.join(' '));

  it('in allow-list mode, allows exactly the prompts one pattern matches whole once folded', () => {
    fc.assert(
      fc.property(fc.array(allowPattern, { minLength: 1, maxLength: 3 }), promptOfWords, (patterns, prompt) => {
        const rules = valid([{ id: 'gr_a', kind: 'allow_list', patterns }]);
        // V8 is a safe oracle on these short, simple prompts; the folded prompt is what both see.
        const expected = patterns.some((pattern) => new RegExp(`^(?:${pattern})$`, 'u').test(foldText(prompt)));
        const result = checkPrompt(rules, prompt);
        return expected ? result.allowed : !result.allowed && result.ruleId === 'gr_a' && result.kind === 'allow_list';
      }),
      { numRuns: 2000 },
    );
  });

  it('allows every prompt an allow-list pattern produces, spelled in any case or width', () => {
    const produced = fc.tuple(fc.constantFrom(...WORDS), fc.constantFrom(...WORDS), fc.boolean(), fc.boolean()).map(([first, second, upper, wide]) => {
      const text = `${first} and ${second}`;
      const cased = upper ? text.toUpperCase() : text;
      return wide ? Array.from(cased, (c) => (c === ' ' ? c : String.fromCodePoint((c.codePointAt(0) as number) + 0xfee0))).join('') : cased;
    });
    const rules = valid([{ id: 'gr_a', kind: 'allow_list', patterns: [`(${WORDS.join('|')}) and (${WORDS.join('|')})`] }]);
    fc.assert(
      fc.property(produced, (prompt) => checkPrompt(rules, prompt).allowed),
      { numRuns: 300 },
    );
  });

  it('checks a 64 KiB adversarial prompt against every accepted rule set within prompt length × states steps', () => {
    const patternPart = fc.constantFrom('a', 'a+', '(a|a)*', '(a+)+', '.*', '\\s+', '\\w*', '(ab|a)*', 'b', '$', '[^b]*', '(a?){5}');
    const ruleSet = fc.array(
      fc.oneof(
        fc.array(patternPart, { minLength: 1, maxLength: 5 }).map((parts) => ({ kind: 'blocked_pattern', pattern: parts.join('') })),
        fc
          .array(
            fc.array(patternPart, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('')),
            { minLength: 1, maxLength: 3 },
          )
          .map((patterns) => ({ kind: 'allow_list', patterns })),
      ),
      { minLength: 1, maxLength: 4 },
    );
    const prompt = fc.constantFrom('a', 'ab', 'a ', 'aab').map((unit) => `${unit.repeat(Math.ceil(65536 / unit.length)).slice(0, 65536)}!`);
    fc.assert(
      fc.property(ruleSet, prompt, (input, text) => {
        const result = validatePromptRules(input);
        fc.pre(result.ok);
        if (!result.ok) return true;
        const compiled = new CompiledPromptRules(result.rules);
        const meter = { steps: 0 };
        compiled.check(text, meter);
        const sources = result.rules.flatMap((rule) => (rule.kind === 'blocked_pattern' ? [rule.pattern] : rule.kind === 'allow_list' ? rule.patterns : []));
        const bound = sources.reduce((sum, source) => sum + 2 * LinearPattern.compile(source).stateCount * (text.length + 1), 0);
        return meter.steps <= bound;
      }),
      { numRuns: 25 },
    );
  });
});
