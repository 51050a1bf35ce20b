import { randomBase62 } from '../shared/ids';
import { LinearPattern, PatternError, PatternSet, StepBudgetExceeded, type StepMeter, codePoints } from './linear-regex';
import { foldText, foldWithSkeleton, withoutInvisible } from './text-fold';

/**
 * Prompt rules (issue 38 §2): what a project or a key refuses before anything is reserved or sent.
 * A rule set is a list of rules, each with its own id:
 * - `max_length`: at most `max` characters (Unicode code points of the prompt as sent);
 * - `blocked_term`: refused when the term appears anywhere in the prompt, both folded (text-fold.ts:
 *   case, width, accents and invisible characters do not matter), or both reduced to their
 *   confusables skeleton (look-alike letters of other scripts do not matter either); a substring, so
 *   a whole word is a pattern with `\b`;
 * - `blocked_pattern`: refused when the regular expression matches anywhere (linear-regex.ts);
 * - `allow_list`: allow-list mode, the prompt must match one of `patterns` whole.
 * A key's set adds to its project's (`mergePromptRules`). A refusal names the rule's id and kind,
 * never the text that matched: it may be the very text an operator does not want in a log.
 *
 * Rule ids are `gr_…`, given by the gateway when a rule is set without one (or chosen by the
 * operator in that shape), rather than positions in the list: an id stays the same when other rules
 * are added or removed, so refusals already counted in usage and logs keep naming the rule that
 * made them, and a key's rules and its project's never share one by accident.
 */

export type PromptRule =
  | { id: string; kind: 'max_length'; max: number }
  | { id: string; kind: 'blocked_term'; term: string }
  | { id: string; kind: 'blocked_pattern'; pattern: string }
  | { id: string; kind: 'allow_list'; patterns: string[] };
export type PromptRuleKind = PromptRule['kind'];
export type PromptRuleSet = readonly PromptRule[];

/**
 * A check's verdict. `too_costly`: the check ran out of its step budget before deciding
 * (PROMPT_RULE_LIMITS.checkSteps), and a prompt the rules could not clear is refused.
 */
export type PromptCheck = { allowed: true } | { allowed: false; ruleId: string; kind: PromptRuleKind } | { allowed: false; ruleId: null; kind: 'too_costly' };

/** A problem with one field of a rule set as an admin sent it; `param` is its path (`prompt_rules[2].pattern`). */
export interface RuleFieldError {
  param: string;
  message: string;
}

export type RuleValidation = { ok: true; rules: PromptRule[] } | { ok: false; errors: RuleFieldError[] };

export const PROMPT_RULE_LIMITS = {
  rules: 1000,
  maxLength: 1_000_000,
  termLength: 200,
  patternLength: 500,
  allowListPatterns: 100,
  /** Compiled states of one set's patterns together. */
  setStates: 20_000,
  /** The longest prompt the gateway takes (code points), for which checkSteps is measured. */
  promptLength: 32_000,
  /**
   * The work one check may do, in steps (PatternSet counts them; folding counts FOLD_STEPS and
   * SKELETON_STEPS per unit it writes), chosen for about 5 ms of CPU on the reference machine
   * (scripts/bench-guardrails.mjs; the numbers in docs/guardrails.md). Past it the prompt is refused.
   */
  checkSteps: 250_000,
} as const;

/**
 * What folding costs, in steps per UTF-16 unit it writes: ASCII is only lower-cased (an eighth of a
 * step a unit read or written); other text is normalised twice and case-mapped (FOLD_STEPS, and as
 * much again for each unit an expansion adds: U+FDFA writes 18), or looked up (SKELETON_STEPS). Set
 * by scripts/bench-guardrails.mjs so that a step costs about the same as a DFA step.
 */
const ALL_ASCII = /^[\x00-\x7f]*$/;
const ASCII_STEPS = 1 / 8;
export const FOLD_STEPS = 4;
export const SKELETON_STEPS = 1;
/** Folding works on pieces of this many UTF-16 units (up to twice as many to reach a safe cut), so that a check out of budget stops early. */
const FOLD_CHUNK = 256;
/**
 * The most one charge adds past the budget before the check stops: a fold piece of 2 × FOLD_CHUNK
 * units, which folding expands at most 18-fold (U+FDFA; checked over every code point by the unit
 * tests), charged FOLD_STEPS for each unit written and each the expansion added, twice when its
 * capitals are read again for the skeleton, and the skeleton's SKELETON_STEPS a unit (a prototype
 * writes at most 6 for one).
 */
export const MAX_OVERSHOOT_STEPS = Math.ceil(2 * FOLD_STEPS * 2 * FOLD_CHUNK * (18 + 17) + SKELETON_STEPS * 6 * 18 * 2 * FOLD_CHUNK + (2 * FOLD_CHUNK) / 8);

const ID_SHAPE = /^gr_[A-Za-z0-9_]{1,60}$/;
const KINDS: readonly PromptRuleKind[] = ['max_length', 'blocked_term', 'blocked_pattern', 'allow_list'];
const FIELDS: Record<PromptRuleKind, readonly string[]> = {
  max_length: ['id', 'kind', 'max'],
  blocked_term: ['id', 'kind', 'term'],
  blocked_pattern: ['id', 'kind', 'pattern'],
  allow_list: ['id', 'kind', 'patterns'],
};

export function newRuleId(): string {
  return `gr_${randomBase62(22)}`;
}

/**
 * Checks a rule set as an admin sets it on a project or a key, and gives it back with an id on every
 * rule; every problem found is reported against its field. At most one `max_length` and one
 * `allow_list` per set (a second would only restate the first); every pattern must compile.
 */
export function validatePromptRules(input: unknown, param = 'prompt_rules'): RuleValidation {
  const errors: RuleFieldError[] = [];
  if (!Array.isArray(input)) return { ok: false, errors: [{ param, message: 'must be an array of rules' }] };
  if (input.length > PROMPT_RULE_LIMITS.rules) return { ok: false, errors: [{ param, message: `must have at most ${PROMPT_RULE_LIMITS.rules} rules` }] };
  const rules: PromptRule[] = [];
  const ids = new Set<string>();
  const once = new Set<PromptRuleKind>();
  let states = 0;
  const pattern = (value: unknown, at: string): string | undefined => {
    const problem = patternProblem(value);
    if (typeof problem === 'string') {
      errors.push({ param: at, message: problem });
      return undefined;
    }
    states += problem.states;
    return value as string;
  };
  input.forEach((raw: unknown, index) => {
    const at = `${param}[${index}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return void errors.push({ param: at, message: 'must be an object' });
    const rule = raw as Record<string, unknown>;
    const kind = rule.kind as PromptRuleKind;
    if (!KINDS.includes(kind)) return void errors.push({ param: `${at}.kind`, message: `must be one of ${KINDS.join(', ')}` });
    for (const field of Object.keys(rule))
      if (!FIELDS[kind].includes(field)) errors.push({ param: `${at}.${field}`, message: `is not a field of a ${kind} rule` });
    if ((kind === 'max_length' || kind === 'allow_list') && once.has(kind)) errors.push({ param: `${at}.kind`, message: `a set has at most one ${kind} rule` });
    once.add(kind);
    let id = newRuleId();
    if (rule.id !== undefined) {
      if (typeof rule.id !== 'string' || !ID_SHAPE.test(rule.id))
        errors.push({ param: `${at}.id`, message: 'must be gr_ followed by 1 to 60 letters, digits or underscores' });
      else if (ids.has(rule.id)) errors.push({ param: `${at}.id`, message: 'is used by another rule of the set' });
      else id = rule.id;
    }
    ids.add(id);
    if (kind === 'max_length') {
      const max = rule.max;
      if (!Number.isInteger(max) || (max as number) < 1 || (max as number) > PROMPT_RULE_LIMITS.maxLength) {
        errors.push({ param: `${at}.max`, message: `must be an integer from 1 to ${PROMPT_RULE_LIMITS.maxLength}` });
      } else rules.push({ id, kind, max: max as number });
    } else if (kind === 'blocked_term') {
      const problem = termProblem(rule.term);
      if (problem) errors.push({ param: `${at}.term`, message: problem });
      else rules.push({ id, kind, term: rule.term as string });
    } else if (kind === 'blocked_pattern') {
      const source = pattern(rule.pattern, `${at}.pattern`);
      if (source !== undefined) rules.push({ id, kind, pattern: source });
    } else {
      const list = rule.patterns;
      if (!Array.isArray(list) || list.length === 0 || list.length > PROMPT_RULE_LIMITS.allowListPatterns) {
        return void errors.push({ param: `${at}.patterns`, message: `must be an array of 1 to ${PROMPT_RULE_LIMITS.allowListPatterns} patterns` });
      }
      const sources = list.map((value: unknown, i) => pattern(value, `${at}.patterns[${i}]`));
      if (sources.every((source) => source !== undefined)) rules.push({ id, kind, patterns: sources as string[] });
    }
  });
  if (states > PROMPT_RULE_LIMITS.setStates) {
    errors.push({ param, message: `the patterns together are too large (${states} states, at most ${PROMPT_RULE_LIMITS.setStates})` });
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, rules };
}

function termProblem(term: unknown): string | undefined {
  if (typeof term !== 'string') return 'must be a string';
  const length = Array.from(term).length;
  if (length < 1 || length > PROMPT_RULE_LIMITS.termLength) return `must be 1 to ${PROMPT_RULE_LIMITS.termLength} characters`;
  if (foldText(term).trim() === '') return 'is empty once case, width, accents and invisible characters are set aside';
  return undefined;
}

/** Why a pattern cannot be a rule, or the states it compiles to. */
function patternProblem(value: unknown): string | { states: number } {
  if (typeof value !== 'string') return 'must be a string';
  const length = Array.from(value).length;
  if (length < 1 || length > PROMPT_RULE_LIMITS.patternLength) return `must be 1 to ${PROMPT_RULE_LIMITS.patternLength} characters`;
  try {
    return { states: LinearPattern.compile(value).stateCount };
  } catch (error) {
    if (error instanceof PatternError) return `is not a usable pattern: ${error.message}`;
    throw error;
  }
}

/**
 * A key's rules added to its project's: every blocked term and pattern of both applies, the prompt
 * must pass both allow-lists when both have one (a key narrows, never widens), and of two maximum
 * lengths the stricter is kept (the project's on a tie).
 */
export function mergePromptRules(project: PromptRuleSet, key: PromptRuleSet): PromptRule[] {
  type MaxLength = Extract<PromptRule, { kind: 'max_length' }>;
  const lengths = [...project, ...key].filter((rule): rule is MaxLength => rule.kind === 'max_length');
  const strictest = lengths.reduce<MaxLength | undefined>((best, rule) => (best === undefined || rule.max < best.max ? rule : best), undefined);
  return [...project, ...key].filter((rule) => rule.kind !== 'max_length' || rule === strictest);
}

/** What a pattern of the search set stands for: the rule that refuses the prompt when it matches. */
interface SearchRule {
  id: string;
  kind: 'blocked_term' | 'blocked_pattern';
}

/**
 * A rule set ready to check prompts: terms folded and patterns compiled once (cache it with the
 * set). Every blocked term (in both its folded form and its skeleton) and every blocked pattern is
 * one automaton (PatternSet), read once over the folded prompt and once over its skeleton when that
 * differs; each allow-list is another, matched whole against the folded prompt.
 */
export class CompiledPromptRules {
  private readonly lengths: Array<{ id: string; max: number }> = [];
  private readonly searchRules: SearchRule[] = [];
  private readonly search: PatternSet | null;
  private readonly hasTerms: boolean;
  private readonly allowLists: Array<{ id: string; set: PatternSet }> = [];

  /** Throws PatternError for a pattern that does not compile (a set that skipped validation). */
  constructor(rules: PromptRuleSet) {
    const terms: Array<{ rule: SearchRule; pattern: LinearPattern }> = [];
    const patterns: Array<{ rule: SearchRule; pattern: LinearPattern }> = [];
    for (const rule of rules) {
      if (rule.kind === 'max_length') this.lengths.push({ id: rule.id, max: rule.max });
      else if (rule.kind === 'blocked_term') {
        const { folded, skeleton } = foldWithSkeleton(rule.term);
        const ref: SearchRule = { id: rule.id, kind: 'blocked_term' };
        terms.push({ rule: ref, pattern: LinearPattern.literal(codePoints(folded)) });
        if (skeleton !== folded) terms.push({ rule: ref, pattern: LinearPattern.literal(codePoints(skeleton)) });
      } else if (rule.kind === 'blocked_pattern')
        patterns.push({ rule: { id: rule.id, kind: 'blocked_pattern' }, pattern: LinearPattern.compile(rule.pattern) });
      else
        this.allowLists.push({
          id: rule.id,
          set: new PatternSet(
            rule.patterns.map((source) => LinearPattern.compile(source)),
            true,
          ),
        });
    }
    // Terms first: at one position, a term is named before a pattern.
    const all = [...terms, ...patterns];
    this.searchRules = all.map((entry) => entry.rule);
    this.search =
      all.length > 0
        ? new PatternSet(
            all.map((entry) => entry.pattern),
            false,
          )
        : null;
    this.hasTerms = terms.length > 0;
  }

  /**
   * The first rule the prompt breaks: length first, then terms and patterns (the one whose match
   * ends first in the prompt), then allow-lists. A check does at most PROMPT_RULE_LIMITS.checkSteps
   * steps (`meter.limit` instead, when given) and refuses the prompt as `too_costly` past them;
   * `meter` counts the steps (tests bound the work with it).
   */
  check(prompt: string, meter?: StepMeter): PromptCheck {
    if (this.lengths.length > 0) {
      const length = codePointLength(prompt);
      const over = this.lengths.find((rule) => length > rule.max);
      if (over) return { allowed: false, ruleId: over.id, kind: 'max_length' };
    }
    if (this.search === null && this.allowLists.length === 0) return { allowed: true };
    const budget: StepMeter = { steps: meter?.steps ?? 0, limit: meter?.limit ?? PROMPT_RULE_LIMITS.checkSteps };
    try {
      const { folded, skeleton } = foldWithin(prompt, this.hasTerms, budget);
      if (this.search !== null) {
        let found = this.search.run(folded, budget);
        if (found < 0 && skeleton !== null && skeleton !== folded) found = this.search.run(skeleton, budget);
        const rule = found >= 0 ? this.searchRules[found] : undefined;
        if (rule) return { allowed: false, ruleId: rule.id, kind: rule.kind };
      }
      const allowList = this.allowLists.find((rule) => rule.set.run(folded, budget) < 0);
      if (allowList) return { allowed: false, ruleId: allowList.id, kind: 'allow_list' };
      return { allowed: true };
    } catch (error) {
      if (error instanceof StepBudgetExceeded) return { allowed: false, ruleId: null, kind: 'too_costly' };
      throw error;
    } finally {
      if (meter) meter.steps = budget.steps;
    }
  }
}

/**
 * Where `text` may be cut for folding piece by piece: before a letter, digit, punctuation, symbol
 * or space (Hangul's vowel and final jamo and emoji excepted), which never composes with what comes
 * before it, so each piece folds as it would inside the whole.
 */
const SAFE_CUT = /(?![\u1160-\u11ff\ud7b0-\ud7ff]|\p{Extended_Pictographic})[\p{L}\p{N}\p{P}\p{S}\p{Zs}]/gu;

/**
 * `text` folded (and, `withSkeleton`, its skeleton) piece by piece, each piece charged to the budget
 * before the next is folded: FOLD_STEPS for each unit written (and each an expansion added),
 * SKELETON_STEPS for each unit of the skeleton, an eighth of a step a unit for ASCII.
 */
function foldWithin(text: string, withSkeleton: boolean, budget: StepMeter): { folded: string; skeleton: string | null } {
  const limit = budget.limit ?? Infinity;
  const folds: string[] = [];
  const skeletons: string[] = [];
  let from = 0;
  while (from < text.length) {
    SAFE_CUT.lastIndex = from + FOLD_CHUNK;
    const cut = from + FOLD_CHUNK < text.length ? SAFE_CUT.exec(text) : null;
    let to = Math.min(text.length, cut === null ? Infinity : cut.index, from + 2 * FOLD_CHUNK);
    // Without a safe cut near (a long run of marks or emoji), cut anyway, between two code points.
    if (to < text.length && (text.charCodeAt(to) & 0xfc00) === 0xdc00) to += 1;
    const piece = text.slice(from, to);
    if (ALL_ASCII.test(piece)) {
      const folded = piece.toLowerCase();
      folds.push(folded);
      if (withSkeleton) skeletons.push(folded);
      budget.steps += Math.ceil(ASCII_STEPS * 2 * piece.length);
    } else {
      const { folded, skeleton, foldedTwice } = withSkeleton ? foldWithSkeleton(piece) : { folded: foldText(piece), skeleton: '', foldedTwice: false };
      const foldCost = FOLD_STEPS * (folded.length + Math.max(0, folded.length - piece.length)) + ASCII_STEPS * piece.length;
      budget.steps += Math.ceil((foldedTwice ? 2 : 1) * foldCost + SKELETON_STEPS * skeleton.length);
      folds.push(folded);
      if (withSkeleton) skeletons.push(skeleton);
    }
    if (budget.steps > limit) throw new StepBudgetExceeded();
    from = to;
  }
  return { folded: folds.join(''), skeleton: withSkeleton ? skeletons.join('') : null };
}

/**
 * The request as the gateway checks, stores and sends it: its prompt without the invisible
 * characters prompt rules ignore (text-fold.ts's withoutInvisible, the one function for both), so
 * nothing the rules did not see reaches the upstream.
 */
export function asSent<T extends { prompt: string }>(input: T): T {
  const prompt = withoutInvisible(input.prompt);
  return prompt === input.prompt ? input : { ...input, prompt };
}

/** What a refused request is told (400 prompt_blocked): the rule's id and kind, never the text that matched. */
export function promptRefusalMessage(verdict: Extract<PromptCheck, { allowed: false }>): string {
  if (verdict.kind === 'too_costly') {
    return 'The prompt could not be checked against the prompt rules of this key or its project within their work budget, so it is refused: shorten the prompt, or ask the operator to simplify the rules.';
  }
  return `The prompt breaks prompt rule ${verdict.ruleId} (${verdict.kind}) of this key or its project.`;
}

/** Checks one prompt against a rule set (compile the set once with CompiledPromptRules to check many). */
export function checkPrompt(rules: PromptRuleSet | CompiledPromptRules, prompt: string): PromptCheck {
  return (rules instanceof CompiledPromptRules ? rules : new CompiledPromptRules(rules)).check(prompt);
}

function codePointLength(text: string): number {
  let length = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i += 1;
    length += 1;
  }
  return length;
}
