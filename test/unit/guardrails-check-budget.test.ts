import {
  CompiledPromptRules,
  MAX_OVERSHOOT_STEPS,
  PROMPT_RULE_LIMITS,
  type PromptRule,
  mergePromptRules,
  validatePromptRules,
} from '../../src/guardrails/prompt-rules';
import { foldText } from '../../src/guardrails/text-fold';

/**
 * The work of one prompt-rule check is bounded (docs/guardrails.md, "What a check costs"): the
 * largest sets the gateway accepts, a key's added to its project's, against the longest prompt it
 * takes, in the shapes that cost most, never count more than PROMPT_RULE_LIMITS.checkSteps steps (plus
 * one fold piece's charge, which may land past it before the check stops). Steps, not time: the time a
 * step takes on the reference machine is measured by scripts/bench-guardrails.mjs.
 */

const MAX = PROMPT_RULE_LIMITS.promptLength;
const accepted = (input: unknown): PromptRule[] => {
  const result = validatePromptRules(input);
  if (!result.ok) throw new Error(JSON.stringify(result.errors).slice(0, 300));
  return result.rules;
};
/** The same set as a key's and as its project's: the largest set a check sees. */
const asKeyAndProject = (rules: PromptRule[]) =>
  mergePromptRules(
    rules,
    rules.map((rule) => ({ ...rule, id: `${rule.id}_k` })),
  );

/** Sets at the limits: 20,000 states of patterns that keep many states alive, 1,000 terms of 200 characters, a 100-pattern allow-list. */
const MAXIMAL_SETS: Record<string, () => PromptRule[]> = {
  'bounded repetitions (the report: 12 patterns, 19,200 states)': () =>
    accepted(Array.from({ length: 12 }, (_, i) => ({ kind: 'blocked_pattern', pattern: `[a-z ]{0,99}${String.fromCharCode(0x61 + i)}q[a-z ]{0,99}z{0,90}!` }))),
  'a DFA that blows up': () => accepted(Array.from({ length: 12 }, (_, i) => ({ kind: 'blocked_pattern', pattern: `[ab]*a[ab]{${60 + i}}!` }))),
  'Unicode classes': () =>
    accepted(Array.from({ length: 12 }, () => ({ kind: 'blocked_pattern', pattern: '\\p{L}{0,99}\\s\\p{N}{0,99}[^\\p{L}\\p{N}\\s]{0,90}!' }))),
  '1,000 terms of 200 characters': () =>
    accepted(Array.from({ length: 1000 }, (_, i) => ({ kind: 'blocked_term', term: `${'ab '.repeat(70).slice(0, 190)}${i}`.padEnd(200, 'q') }))),
  'a 100-pattern allow-list': () => accepted([{ kind: 'allow_list', patterns: Array.from({ length: 100 }, (_, i) => `[a-z ]{0,30}s${i}ubject[a-z ,]{0,60}`) }]),
};
const MAXIMAL_PROMPTS: Record<string, string> = {
  'a b a b…': 'ab '.repeat(MAX).slice(0, MAX),
  'a and b at random': Array.from({ length: MAX }, (_, i) => (((i * 2654435761) >>> 7) % 2 ? 'a' : 'b')).join(''),
  'CJK, every character different': Array.from({ length: MAX }, (_, i) => String.fromCodePoint(0x4e00 + (i % 20000))).join(''),
  'U+FDFA, which folds to 18 characters': '\ufdfa'.repeat(MAX),
  'Cyrillic words': 'съешь же ещё этих мягких булок '.repeat(MAX).slice(0, MAX),
};

describe('the step budget of a check', () => {
  const cases = Object.keys(MAXIMAL_SETS).flatMap((set) => Object.keys(MAXIMAL_PROMPTS).map((prompt) => [set, prompt] as const));

  it.each(cases)('%s against a maximal prompt of %s: at most the budgeted steps', (set, prompt) => {
    const compiled = new CompiledPromptRules(asKeyAndProject(MAXIMAL_SETS[set]!()));
    const meter = { steps: 0 };
    const verdict = compiled.check(MAXIMAL_PROMPTS[prompt]!, meter);
    expect(meter.steps).toBeLessThanOrEqual(PROMPT_RULE_LIMITS.checkSteps + MAX_OVERSHOOT_STEPS);
    // Past the budget the prompt is refused, never let through unchecked.
    if (meter.steps > PROMPT_RULE_LIMITS.checkSteps) expect(verdict).toEqual({ allowed: false, ruleId: null, kind: 'too_costly' });
  });

  it('decides a maximal prompt of ordinary text against an ordinary large set within the budget, and a warm set reads it at about a step a character', () => {
    const rules = accepted([
      ...Array.from({ length: 200 }, (_, i) => ({ kind: 'blocked_term', term: `forbidden${i} name` })),
      ...Array.from({ length: 12 }, (_, i) => ({
        kind: 'blocked_pattern',
        pattern: `\\b(${Array.from({ length: 40 }, (_, j) => `w${i}x${j}`).join('|')})\\b`,
      })),
    ]);
    const compiled = new CompiledPromptRules(asKeyAndProject(rules));
    // Folding other scripts costs more (docs/guardrails.md): at the longest prompt they come near the budget.
    const texts = {
      'A lighthouse at dawn, waves and gulls, in oil. ': MAX,
      'Маяк на рассвете, волны и чайки. ': MAX / 2,
      '黎明时分的灯塔，海浪和海鸥。': MAX / 2,
    };
    for (const [text, length] of Object.entries(texts)) {
      const meter = { steps: 0 };
      expect(compiled.check(text.repeat(MAX).slice(0, length), meter)).toEqual({ allowed: true });
      expect(meter.steps).toBeLessThan(PROMPT_RULE_LIMITS.checkSteps);
    }
    const warm = { steps: 0 };
    compiled.check('A lighthouse at dawn, waves and gulls, in oil. '.repeat(MAX).slice(0, MAX), warm);
    expect(warm.steps).toBeLessThan(2 * MAX);
  });

  it('a check stops at the limit it is given and refuses the prompt', () => {
    const compiled = new CompiledPromptRules(accepted([{ id: 'gr_t', kind: 'blocked_term', term: 'zebra' }]));
    expect(compiled.check('a horse in a field', { steps: 0, limit: 5 })).toEqual({ allowed: false, ruleId: null, kind: 'too_costly' });
    expect(compiled.check('a horse in a field', { steps: 0 })).toEqual({ allowed: true });
  });

  it('folding writes at most 18 UTF-16 units for each it reads, as MAX_OVERSHOOT_STEPS assumes', () => {
    let most = 0;
    for (let cp = 0; cp <= 0x10ffff; cp += 1) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const text = String.fromCodePoint(cp);
      most = Math.max(most, foldText(text).length / text.length);
    }
    expect(most).toBeLessThanOrEqual(18);
  });
});
