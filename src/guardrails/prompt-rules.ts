import { randomBase62 } from '../shared/ids';
import { LinearPattern, PatternError, type StepMeter, codePoints } from './linear-regex';
import { foldText } from './text-fold';

/**
 * Prompt rules (issue 38 §2): what a project or a key refuses before anything is reserved or sent.
 * A rule set is a list of rules, each with its own id:
 * - `max_length`: at most `max` characters (Unicode code points of the prompt as sent);
 * - `blocked_term`: refused when the term appears anywhere in the prompt, both folded (text-fold.ts:
 *   case, width, accents and invisible characters do not matter); a substring, so a whole word is a
 *   pattern with `\b`;
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

export type PromptCheck = { allowed: true } | { allowed: false; ruleId: string; kind: PromptRuleKind };

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
  /** Compiled states of one set's patterns together: a check costs at most prompt length × this. */
  setStates: 20_000,
} as const;

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

/** A rule set ready to check prompts: terms folded and patterns compiled once (cache it with the set). */
export class CompiledPromptRules {
  private readonly lengths: Array<{ id: string; max: number }> = [];
  private readonly terms: Array<{ id: string; folded: string }> = [];
  private readonly patterns: Array<{ id: string; pattern: LinearPattern }> = [];
  private readonly allowLists: Array<{ id: string; patterns: LinearPattern[] }> = [];

  /** Throws PatternError for a pattern that does not compile (a set that skipped validation). */
  constructor(rules: PromptRuleSet) {
    for (const rule of rules) {
      if (rule.kind === 'max_length') this.lengths.push({ id: rule.id, max: rule.max });
      else if (rule.kind === 'blocked_term') this.terms.push({ id: rule.id, folded: foldText(rule.term) });
      else if (rule.kind === 'blocked_pattern') this.patterns.push({ id: rule.id, pattern: LinearPattern.compile(rule.pattern) });
      else this.allowLists.push({ id: rule.id, patterns: rule.patterns.map((source) => LinearPattern.compile(source)) });
    }
  }

  /**
   * The first rule the prompt breaks, cheapest kinds first: length, terms, patterns, allow-lists.
   * `meter` counts the pattern matchers' steps (tests bound the work with it).
   */
  check(prompt: string, meter?: StepMeter): PromptCheck {
    if (this.lengths.length > 0) {
      const length = codePointLength(prompt);
      const over = this.lengths.find((rule) => length > rule.max);
      if (over) return { allowed: false, ruleId: over.id, kind: 'max_length' };
    }
    if (this.terms.length === 0 && this.patterns.length === 0 && this.allowLists.length === 0) return { allowed: true };
    const folded = foldText(prompt);
    const term = this.terms.find((rule) => folded.includes(rule.folded));
    if (term) return { allowed: false, ruleId: term.id, kind: 'blocked_term' };
    const text = codePoints(folded);
    const pattern = this.patterns.find((rule) => rule.pattern.search(text, meter));
    if (pattern) return { allowed: false, ruleId: pattern.id, kind: 'blocked_pattern' };
    const allowList = this.allowLists.find((rule) => !rule.patterns.some((p) => p.matchesWhole(text, meter)));
    if (allowList) return { allowed: false, ruleId: allowList.id, kind: 'allow_list' };
    return { allowed: true };
  }
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
