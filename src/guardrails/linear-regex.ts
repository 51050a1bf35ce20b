import { foldText } from './text-fold';

/**
 * The regular expressions of prompt rules, matched in time linear in the prompt.
 *
 * Why a matcher of our own instead of a static "is this pattern safe for V8" check: V8's engine
 * backtracks, and the patterns that blow up are not only the nested-quantifier ones such a check
 * can spot (`(a+)+$`, exponential); a single unbounded quantifier searched for anywhere in the
 * prompt is already quadratic (`\s+x` against 64 KiB of spaces tries every start and scans to the
 * end from each: about 2·10⁹ steps), as are adjacent overlapping ones (`\w*\w*\w*$`, cubic). A check
 * conservative enough to rule all of that out refuses nearly every useful pattern. So patterns are
 * compiled to a Thompson automaton and simulated state-set by state-set (RE2's approach): every
 * state is visited at most once per prompt character, so a check costs at most
 * O(prompt length × pattern states), whatever the pattern. What such a matcher cannot do is refused
 * when the rule is set, with the reason: backreferences and lookarounds.
 *
 * The syntax is JavaScript's (`u` mode) less those two: literals and escapes (`\n \t \xHH \uHHHH
 * \u{…}`, escaped punctuation), `.`, classes `[…]` / `[^…]` with ranges, `\d \w \s` and their
 * negations, `\p{…}` / `\P{…}`, `^ $ \b \B`, groups `(…)`, `(?:…)`, `(?<name>…)`, alternation and
 * the quantifiers `* + ? {n} {n,} {n,m}` (lazy forms accepted: only whether the pattern matches is
 * asked). Matching is against the folded prompt (text-fold.ts) and pattern literals are folded the
 * same way, so every pattern is case- and width-insensitive; `^`/`$` are the prompt's start and end.
 */

/** The most states one pattern may compile to (bounded repetitions are expanded). */
export const MAX_PATTERN_STATES = 2000;
/** The largest count a `{n,m}` may name. */
export const MAX_REPEAT = 100;

export class PatternError extends Error {}

type Predicate = (cp: number) => boolean;
type AssertKind = 'start' | 'end' | 'word' | 'not_word';
type Node =
  | { type: 'char'; test: Predicate; lit?: number }
  | { type: 'seq'; items: Node[] }
  | { type: 'alt'; options: Node[] }
  | { type: 'repeat'; node: Node; min: number; max: number }
  | { type: 'assert'; kind: AssertKind };

const nativeClasses = new Map<string, Predicate>();
/** Native classes whose answers on the Basic Multilingual Plane are remembered (64 KiB each). */
const REMEMBERED_NATIVE_CLASSES = 64;

/**
 * One code point tested with a native single-character expression (a `\p{…}` property): constant
 * time per character, its answers on the BMP remembered once asked (an automaton's misses ask often).
 */
function nativeClass(source: string): Predicate {
  const known = nativeClasses.get(source);
  if (known) return known;
  const re = new RegExp(`^${source}$`, 'u');
  const ask: Predicate = (cp) => re.test(String.fromCodePoint(cp));
  let predicate = ask;
  if (nativeClasses.size < REMEMBERED_NATIVE_CLASSES) {
    const answers = new Int8Array(0x10000);
    predicate = (cp) => {
      if (cp > 0xffff) return ask(cp);
      const answer = answers[cp] as number;
      if (answer !== 0) return answer > 0;
      const result = ask(cp);
      answers[cp] = result ? 1 : -1;
      return result;
    };
  }
  nativeClasses.set(source, predicate);
  return predicate;
}

/** What testing one character against a class costs, in steps: its ranges and escapes. */
const CLASS_COST = new WeakMap<Predicate, number>();

const isDigit: Predicate = (cp) => cp >= 0x30 && cp <= 0x39;
const isWord: Predicate = (cp) => isDigit(cp) || (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a) || cp === 0x5f;
/** `\s`: ECMAScript's WhiteSpace and LineTerminator (Zs is fixed: U+0020, U+00A0, U+1680, U+2000–200A, U+202F, U+205F, U+3000). */
const isSpace: Predicate = (cp) =>
  (cp >= 0x09 && cp <= 0x0d) ||
  cp === 0x20 ||
  cp === 0xa0 ||
  cp === 0x1680 ||
  (cp >= 0x2000 && cp <= 0x200a) ||
  cp === 0x2028 ||
  cp === 0x2029 ||
  cp === 0x202f ||
  cp === 0x205f ||
  cp === 0x3000 ||
  cp === 0xfeff;
const isLineTerminator: Predicate = (cp) => cp === 0x0a || cp === 0x0d || cp === 0x2028 || cp === 0x2029;
const not =
  (test: Predicate): Predicate =>
  (cp) =>
    !test(cp);

const CLASS_ESCAPES: Record<string, Predicate> = { d: isDigit, D: not(isDigit), w: isWord, W: not(isWord), s: isSpace, S: not(isSpace) };
const CONTROL_ESCAPES: Record<string, number> = { n: 0x0a, r: 0x0d, t: 0x09, f: 0x0c, v: 0x0b };
const SYNTAX_CHARACTERS = new Set('^$\\.*+?()[]{}|/-');

/** upperOf's answers on the BMP: 0 not asked yet, -1 none, else the code point + 1. */
const UPPER = new Int32Array(0x10000);

/** The single code point upper-cased, when that is one code point (folded text is lower-case). */
function upperOf(cp: number): number | undefined {
  const known = cp <= 0xffff ? (UPPER[cp] as number) : 0;
  if (known !== 0) return known > 0 ? known - 1 : undefined;
  const upper = String.fromCodePoint(cp).toUpperCase();
  const first = upper.codePointAt(0);
  const result = first !== undefined && upper.length === String.fromCodePoint(first).length ? first : undefined;
  if (cp <= 0xffff) UPPER[cp] = result === undefined ? -1 : result + 1;
  return result;
}

/** A literal of the pattern as the nodes of its folded form (which may be several code points, or none). */
function literal(cp: number): Node {
  const folded = codePoints(foldText(String.fromCodePoint(cp)));
  const items: Node[] = folded.map((f) => ({ type: 'char', test: (x: number) => x === f, lit: f }));
  return items.length === 1 ? (items[0] as Node) : { type: 'seq', items };
}

class Parser {
  private pos = 0;
  private readonly cps: string[];
  private readonly groupNames = new Set<string>();

  constructor(source: string) {
    this.cps = Array.from(source);
  }

  parse(): Node {
    const node = this.alternation();
    if (this.pos < this.cps.length) throw this.error(this.peek() === ')' ? 'unmatched ")"' : `unexpected "${this.peek()}"`);
    return node;
  }

  private error(message: string): PatternError {
    return new PatternError(`${message} at position ${this.pos}`);
  }

  private peek(offset = 0): string | undefined {
    return this.cps[this.pos + offset];
  }

  private eat(expected: string): boolean {
    if (this.peek() !== expected) return false;
    this.pos += 1;
    return true;
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.eat('|')) options.push(this.sequence());
    return options.length === 1 ? (options[0] as Node) : { type: 'alt', options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.pos < this.cps.length && this.peek() !== '|' && this.peek() !== ')') items.push(this.quantified());
    return items.length === 1 ? (items[0] as Node) : { type: 'seq', items };
  }

  private quantified(): Node {
    const atom = this.atom();
    const bounds = this.quantifier();
    if (!bounds) return atom;
    if (atom.type === 'assert') throw this.error('an assertion cannot be repeated');
    this.eat('?');
    if (this.quantifierAhead()) throw this.error('nothing to repeat');
    return { type: 'repeat', node: atom, min: bounds.min, max: bounds.max };
  }

  private quantifierAhead(): boolean {
    const saved = this.pos;
    const found = this.quantifier() !== undefined;
    this.pos = saved;
    return found;
  }

  /** `* + ? {n} {n,} {n,m}` at the cursor (consumed), or undefined (nothing consumed). */
  private quantifier(): { min: number; max: number } | undefined {
    const c = this.peek();
    if (c === '*' || c === '+' || c === '?') {
      this.pos += 1;
      return { min: c === '+' ? 1 : 0, max: c === '?' ? 1 : Infinity };
    }
    if (c !== '{') return undefined;
    const match = /^\{(\d+)(,(\d*))?\}/.exec(this.cps.slice(this.pos, this.pos + 24).join(''));
    if (!match) return undefined;
    const min = Number(match[1]);
    const max = match[2] === undefined ? min : match[3] === '' ? Infinity : Number(match[3]);
    if (min > MAX_REPEAT || (max !== Infinity && max > MAX_REPEAT)) throw this.error(`a repetition count above ${MAX_REPEAT}`);
    if (max < min) throw this.error('a repetition {n,m} with m below n');
    this.pos += match[0].length;
    return { min, max };
  }

  private atom(): Node {
    const c = this.peek() as string;
    this.pos += 1;
    switch (c) {
      case '(':
        return this.group();
      case '[':
        return { type: 'char', test: this.characterClass() };
      case '.':
        return { type: 'char', test: not(isLineTerminator) };
      case '^':
        return { type: 'assert', kind: 'start' };
      case '$':
        return { type: 'assert', kind: 'end' };
      case '\\':
        return this.atomEscape();
      case '*':
      case '+':
      case '?':
        this.pos -= 1;
        throw this.error('nothing to repeat');
      case '{':
        this.pos -= 1;
        throw this.error(this.quantifierAhead() ? 'nothing to repeat' : 'a lone "{" (escape it as \\{)');
      case '}':
      case ']':
        this.pos -= 1;
        throw this.error(`a lone "${c}" (escape it as \\${c})`);
      default:
        return literal(c.codePointAt(0) as number);
    }
  }

  private group(): Node {
    if (this.eat('?')) {
      const kind = this.peek();
      if (kind === '=' || kind === '!' || (kind === '<' && (this.peek(1) === '=' || this.peek(1) === '!'))) {
        throw this.error('lookaround assertions are not supported (rules are matched in linear time)');
      }
      if (kind === '<') {
        const close = this.cps.indexOf('>', this.pos);
        const name = close < 0 ? '' : this.cps.slice(this.pos + 1, close).join('');
        if (!/^[A-Za-z_$][\w$]*$/.test(name)) throw this.error('a group name must be an identifier');
        if (this.groupNames.has(name)) throw this.error(`a second group named "${name}"`);
        this.groupNames.add(name);
        this.pos = close + 1;
      } else if (!this.eat(':')) {
        throw this.error('unsupported group (only (…), (?:…) and (?<name>…))');
      }
    }
    const inner = this.alternation();
    if (!this.eat(')')) throw this.error('missing ")"');
    // Wrapped: a group may be repeated even when it holds only an assertion.
    return { type: 'seq', items: [inner] };
  }

  private atomEscape(): Node {
    const c = this.peek();
    if (c === 'b' || c === 'B') {
      this.pos += 1;
      return { type: 'assert', kind: c === 'b' ? 'word' : 'not_word' };
    }
    if (c !== undefined && (/[1-9]/.test(c) || c === 'k')) throw this.error('backreferences are not supported (rules are matched in linear time)');
    const escaped = this.escape();
    return typeof escaped === 'number' ? literal(escaped) : { type: 'char', test: escaped };
  }

  /** After a `\`: a code point, or a predicate for a class escape. */
  private escape(inClass = false): number | Predicate {
    const c = this.peek();
    if (c === undefined) throw this.error('a "\\" at the end of the pattern');
    this.pos += 1;
    const classEscape = CLASS_ESCAPES[c];
    if (classEscape) return classEscape;
    const control = CONTROL_ESCAPES[c];
    if (control !== undefined) return control;
    if (inClass && c === 'b') return 0x08;
    if (c === '0' && !/\d/.test(this.peek() ?? '')) return 0;
    if (c === 'p' || c === 'P') return this.property(c === 'P');
    if (c === 'x') return this.hex(2);
    if (c === 'u') {
      if (!this.eat('{')) return this.hex(4);
      const close = this.cps.indexOf('}', this.pos);
      const digits = close < 0 ? '' : this.cps.slice(this.pos, close).join('');
      if (!/^[0-9a-fA-F]{1,6}$/.test(digits) || Number.parseInt(digits, 16) > 0x10ffff) throw this.error('a malformed \\u{…} escape');
      this.pos = close + 1;
      return Number.parseInt(digits, 16);
    }
    if (SYNTAX_CHARACTERS.has(c)) return c.codePointAt(0) as number;
    this.pos -= 1;
    throw this.error(`an unknown escape "\\${c}"`);
  }

  private hex(length: number): number {
    const digits = this.cps.slice(this.pos, this.pos + length).join('');
    if (!new RegExp(`^[0-9a-fA-F]{${length}}$`).test(digits)) throw this.error(`a malformed hexadecimal escape`);
    this.pos += length;
    return Number.parseInt(digits, 16);
  }

  private property(negated: boolean): Predicate {
    const close = this.cps.indexOf('}', this.pos);
    if (this.peek() !== '{' || close < 0) throw this.error('a malformed \\p{…} escape');
    const name = this.cps.slice(this.pos + 1, close).join('');
    if (!/^[A-Za-z_]+(=[A-Za-z_]+)?$/.test(name)) throw this.error('a malformed \\p{…} escape');
    let test: Predicate;
    try {
      test = nativeClass(`\\p{${name}}`);
    } catch {
      throw this.error(`an unknown Unicode property "${name}"`);
    }
    this.pos = close + 1;
    return negated ? not(test) : test;
  }

  /**
   * `[…]` after its `[`. The prompt is folded (lower-case, accents removed), so a member matches a
   * character when it contains it or its upper-case form, and single characters are folded too.
   */
  private characterClass(): Predicate {
    const negated = this.eat('^');
    const ranges: Array<[number, number]> = [];
    const tests: Predicate[] = [];
    const member = (): number | Predicate => {
      const c = this.peek();
      if (c === undefined) throw this.error('missing "]"');
      this.pos += 1;
      return c === '\\' ? this.escape(true) : (c.codePointAt(0) as number);
    };
    while (!this.eat(']')) {
      const low = member();
      if (this.peek() === '-' && this.peek(1) !== ']' && this.peek(1) !== undefined) {
        this.pos += 1;
        const high = member();
        if (typeof low !== 'number' || typeof high !== 'number') throw this.error('a class escape cannot bound a range');
        if (high < low) throw this.error('a range out of order');
        ranges.push([low, high]);
      } else if (typeof low === 'number') {
        ranges.push([low, low]);
        const folded = Array.from(foldText(String.fromCodePoint(low)));
        if (folded.length === 1) {
          const f = (folded[0] as string).codePointAt(0) as number;
          ranges.push([f, f]);
        }
      } else {
        tests.push(low);
      }
    }
    const contains = (cp: number) => ranges.some(([lo, hi]) => cp >= lo && cp <= hi) || tests.some((test) => test(cp));
    const matches: Predicate = (cp) => {
      if (contains(cp)) return true;
      const upper = upperOf(cp);
      return upper !== undefined && upper !== cp && contains(upper);
    };
    const predicate = negated ? not(matches) : matches;
    CLASS_COST.set(predicate, 2 * (1 + ranges.length + tests.length));
    return predicate;
  }
}

const Op = { Char: 0, Split: 1, Assert: 2, Match: 3 } as const;
type Op = (typeof Op)[keyof typeof Op];

interface State {
  op: Op;
  test?: Predicate;
  /** The one code point a Char state accepts, when it is a literal. */
  lit?: number;
  assert?: AssertKind;
  out: number;
  out2: number;
}

/** Thompson construction in continuation style: each node is compiled in front of the state it leads to. */
class Compiler {
  readonly states: State[] = [{ op: Op.Match, out: -1, out2: -1 }];

  private add(state: State): number {
    if (this.states.length >= MAX_PATTERN_STATES)
      throw new PatternError(`the pattern is too large (over ${MAX_PATTERN_STATES} states once its repetitions are expanded)`);
    this.states.push(state);
    return this.states.length - 1;
  }

  compile(node: Node, next: number): number {
    switch (node.type) {
      case 'char':
        return this.add({ op: Op.Char, test: node.test, ...(node.lit !== undefined ? { lit: node.lit } : {}), out: next, out2: -1 });
      case 'assert':
        return this.add({ op: Op.Assert, assert: node.kind, out: next, out2: -1 });
      case 'seq':
        return node.items.reduceRight((after, item) => this.compile(item, after), next);
      case 'alt':
        return node.options.map((option) => this.compile(option, next)).reduceRight((rest, start) => this.add({ op: Op.Split, out: start, out2: rest }));
      case 'repeat': {
        let tail = next;
        if (node.max === Infinity) {
          const loop = this.add({ op: Op.Split, out: -1, out2: next });
          (this.states[loop] as State).out = this.compile(node.node, loop);
          tail = loop;
        } else {
          for (let i = node.min; i < node.max; i += 1) tail = this.add({ op: Op.Split, out: this.compile(node.node, tail), out2: next });
        }
        for (let i = 0; i < node.min; i += 1) tail = this.compile(node.node, tail);
        return tail;
      }
    }
  }
}

/**
 * Counts a matcher's work: characters read, state visits and character tests (tests use it instead
 * of timings). Past `limit`, the matcher stops with StepBudgetExceeded.
 */
export interface StepMeter {
  steps: number;
  limit?: number;
}

/** A check stopped by its meter's limit: it did not decide. */
export class StepBudgetExceeded extends Error {}

export class LinearPattern {
  private constructor(
    private readonly states: State[],
    private readonly start: number,
  ) {}

  /** Parses and compiles `source`; throws PatternError with the reason when it cannot be matched in linear time. */
  static compile(source: string): LinearPattern {
    const compiler = new Compiler();
    const start = compiler.compile(new Parser(source).parse(), 0);
    return new LinearPattern(compiler.states, start);
  }

  /** The pattern that matches exactly these code points (a blocked term, already folded): one state each, no limit. */
  static literal(text: readonly number[]): LinearPattern {
    const states: State[] = [{ op: Op.Match, out: -1, out2: -1 }];
    let next = 0;
    for (let i = text.length - 1; i >= 0; i -= 1) {
      const lit = text[i] as number;
      states.push({ op: Op.Char, test: (cp) => cp === lit, lit, out: next, out2: -1 });
      next = states.length - 1;
    }
    return new LinearPattern(states, next);
  }

  /** The automaton, for PatternSet. */
  get program(): { readonly states: readonly State[]; readonly start: number } {
    return { states: this.states, start: this.start };
  }

  get stateCount(): number {
    return this.states.length;
  }

  /** Whether the pattern matches anywhere in `text`: the code points of folded text (`codePoints(foldText(…))`). */
  search(text: readonly number[], meter?: StepMeter): boolean {
    return this.run(text, false, meter);
  }

  /** Whether the pattern matches the whole of `text` (as if written `^(?:…)$`). */
  matchesWhole(text: readonly number[], meter?: StepMeter): boolean {
    return this.run(text, true, meter);
  }

  private run(text: readonly number[], whole: boolean, meter?: StepMeter): boolean {
    const { states } = this;
    const n = text.length;
    // seen[s] === pos + 1: state s is already in the list for position pos (positions only grow).
    const seen = new Int32Array(states.length);
    const stack: number[] = [];
    let current: number[] = [];
    let next: number[] = [];
    let steps = 0;
    const holds = (kind: AssertKind, pos: number): boolean => {
      if (kind === 'start') return pos === 0;
      if (kind === 'end') return pos === n;
      const before = pos > 0 && isWord(text[pos - 1] as number);
      const after = pos < n && isWord(text[pos] as number);
      return (before !== after) === (kind === 'word');
    };
    /** Adds `from` and every state reachable from it without reading a character; true when that reaches the match. */
    const close = (from: number, pos: number, list: number[]): boolean => {
      stack.push(from);
      while (stack.length > 0) {
        const s = stack.pop() as number;
        if (seen[s] === pos + 1) continue;
        seen[s] = pos + 1;
        steps += 1;
        const state = states[s] as State;
        if (state.op === Op.Char) list.push(s);
        else if (state.op === Op.Split) stack.push(state.out2, state.out);
        else if (state.op === Op.Assert) {
          if (holds(state.assert as AssertKind, pos)) stack.push(state.out);
        } else if (!whole || pos === n) {
          stack.length = 0;
          return true;
        }
      }
      return false;
    };
    try {
      for (let pos = 0; ; pos += 1) {
        if ((!whole || pos === 0) && close(this.start, pos, current)) return true;
        if (pos === n || (whole && current.length === 0)) return false;
        const cp = text[pos] as number;
        for (const s of current) {
          const state = states[s] as State;
          steps += 1;
          if ((state.test as Predicate)(cp) && close(state.out, pos + 1, next)) return true;
        }
        [current, next] = [next, current];
        next.length = 0;
      }
    } finally {
      if (meter) meter.steps += steps;
    }
  }
}

/** The code points of a text; of folded text, the form patterns are matched against. */
export function codePoints(text: string): number[] {
  return Array.from(text, (c) => c.codePointAt(0) as number);
}

const END = 0;
const WORD = 1;
const OTHER = 2;
/** What surrounds a position: the character before (START at the text's start) or after (END at its end). */
const START = 0;

/** One state of the lazily built DFA: the NFA states still to be closed, and what the last character was. */
interface DfaState {
  readonly kernel: Int32Array;
  readonly before: number;
  /** The closure before a word character, another character, and the text's end. */
  readonly closures: Array<Closure | undefined>;
  /** Cached transitions: on ASCII by code point, on the rest in a map. */
  ascii: Array<DfaState | undefined> | undefined;
  other: Map<number, DfaState> | undefined;
  /** The next state on any non-ASCII character its closure's literals (`otherLiterals`) do not name (see Closure.literals). */
  otherwise: DfaState | undefined;
  otherLiterals: ReadonlySet<number> | undefined;
}
interface Closure {
  readonly chars: Int32Array;
  /**
   * When every character state of the closure is a literal: its non-ASCII literals. Any other
   * non-ASCII character then leads to the same state, built once (CJK text against terms costs
   * one step a character, not one transition per distinct character).
   */
  readonly literals: ReadonlySet<number> | null;
  /**
   * For a closure of more than INDEX_FROM literal states: its literal states by code point, and
   * the others, so a transition tests only the literals it names (a thousand terms' first letters).
   */
  readonly index: { byLiteral: Map<number, number[]>; classes: Int32Array } | null;
  /** The lowest pattern index whose match state the closure reaches; -1 for none. */
  readonly match: number;
}

/**
 * What building a transition costs, in steps (one step: reading a character through a cached
 * transition): each NFA state the closure visits, each character state tested (and each distinct
 * class asked, by its size), each state of the new kernel (sorted, hashed, compared, kept), and the
 * rest (the look-up, the transition's entry). Measured by
 * scripts/bench-guardrails.mjs so that a step costs about the same whatever the set.
 */
const VISIT_STEPS = 5;
const TEST_STEPS = 3;
const KERNEL_STEPS = 8;
const MISS_STEPS = 48;
/** Closures with more literal states than this are indexed by literal, at this many steps a character state. */
const INDEX_FROM = 16;
const INDEX_STEPS = 2;
/** A character read through a state's `otherwise` (a set look-up beside the step). */
const OTHERWISE_STEPS = 1;

/** The most DFA states one set keeps, and the most NFA state numbers they hold; past either, the cache starts again. */
export const DFA_CACHE = { states: 2000, ints: 500_000 } as const;

/**
 * Several patterns matched at once, as one automaton: its NFA states are turned into DFA states
 * lazily, as the text reaches them, and the DFA states and their transitions are kept between
 * checks (RE2's lazy DFA). Once a set has seen prompts like the next one, a check reads each
 * character with one cached transition; a transition not yet built costs the NFA states it closes
 * over and the character tests it makes, all counted by the meter. The cache is bounded
 * (DFA_CACHE): a set whose DFA would be larger starts it again, still correct, at NFA cost.
 * `^`, `$`, `\b` and `\B` are decided when a state is closed, from the kinds of character on both
 * sides (the DFA state remembers the kind before; the closure is kept per kind after).
 */
export class PatternSet {
  private readonly op: Uint8Array;
  private readonly out: Int32Array;
  private readonly out2: Int32Array;
  private readonly lit: Int32Array;
  /** A non-literal character state's predicate, by index into `predicates` (-1 for literals): a repeated class is one predicate. */
  private readonly predicateOf: Int32Array;
  private readonly predicates: Predicate[] = [];
  private readonly predicateCost: number[] = [];
  /** Per transition built: each predicate's answer (1 yes, 2 no) and the epoch it was asked in. */
  private answers = new Uint8Array(0);
  private answeredIn = new Int32Array(0);
  private readonly asserts: Array<AssertKind | undefined>;
  private readonly matchOf: Int32Array;
  private readonly starts: Int32Array;
  private readonly seen: Int32Array;
  private epoch = 0;
  /** DFA states by a hash of their kernel and kind. */
  private cache = new Map<number, DfaState[]>();
  private cacheStates = 0;
  private cachedInts = 0;
  /** Scratch: the closure's stack (the kernel, the starts, then at most two pushes per state visited) and the next kernel. */
  private readonly stack: Int32Array;
  private readonly scratch: Int32Array;

  /**
   * `whole`: each pattern must match the whole text (allow-lists); otherwise anywhere. A pattern's
   * index in `patterns` is what `run` answers.
   */
  constructor(
    patterns: readonly LinearPattern[],
    private readonly whole: boolean,
  ) {
    const size = patterns.reduce((sum, pattern) => sum + pattern.stateCount, 0);
    this.op = new Uint8Array(size);
    this.out = new Int32Array(size);
    this.out2 = new Int32Array(size);
    this.lit = new Int32Array(size).fill(-1);
    this.predicateOf = new Int32Array(size).fill(-1);
    const predicateIndex = new Map<Predicate, number>();
    this.asserts = new Array<AssertKind | undefined>(size);
    this.matchOf = new Int32Array(size).fill(-1);
    this.starts = new Int32Array(patterns.length);
    this.seen = new Int32Array(size);
    this.stack = new Int32Array(3 * size + patterns.length + 1);
    this.scratch = new Int32Array(size);
    let offset = 0;
    patterns.forEach((pattern, index) => {
      const { states, start } = pattern.program;
      states.forEach((state, i) => {
        const s = offset + i;
        this.op[s] = state.op;
        this.out[s] = state.out < 0 ? -1 : offset + state.out;
        this.out2[s] = state.out2 < 0 ? -1 : offset + state.out2;
        if (state.lit !== undefined) this.lit[s] = state.lit;
        else if (state.test) {
          let index = predicateIndex.get(state.test);
          if (index === undefined) {
            index = this.predicates.length;
            predicateIndex.set(state.test, index);
            this.predicates.push(state.test);
            this.predicateCost.push(CLASS_COST.get(state.test) ?? 1);
          }
          this.predicateOf[s] = index;
        }
        this.asserts[s] = state.assert;
        if (state.op === Op.Match) this.matchOf[s] = index;
      });
      this.starts[index] = offset + start;
      offset += states.length;
    });
    this.answers = new Uint8Array(this.predicates.length);
    this.answeredIn = new Int32Array(this.predicates.length);
  }

  get stateCount(): number {
    return this.op.length;
  }

  /**
   * The lowest index of the patterns that match `text` at the first position where any does (for
   * `whole`: of those that match all of it); -1 when none does. Throws StepBudgetExceeded past the
   * meter's limit. `text` is folded text (foldText), read as code points.
   */
  run(text: string, meter: StepMeter): number {
    const limit = meter.limit ?? Infinity;
    let steps = meter.steps;
    let state = this.intern(this.whole ? this.starts : new Int32Array(0), START);
    try {
      for (let i = 0; i < text.length; i += 1) {
        let cp = text.charCodeAt(i);
        if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
          const low = text.charCodeAt(i + 1);
          if (low >= 0xdc00 && low <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            i += 1;
          }
        }
        steps += 1;
        let next: DfaState | undefined;
        if (cp < 0x80) next = state.ascii?.[cp];
        else if (state.otherwise !== undefined && !(state.otherLiterals as ReadonlySet<number>).has(cp)) {
          next = state.otherwise;
          steps += OTHERWISE_STEPS;
        } else next = state.other?.get(cp);
        if (next === undefined) {
          const kind = cp < 0x80 && isWord(cp) ? WORD : OTHER;
          const closure = this.closure(state, kind, limit - steps);
          steps += closure.cost;
          const { match, literals } = closure.value;
          if (match >= 0) return match;
          if (cp >= 0x80 && literals !== null && !literals.has(cp)) {
            next = this.intern(new Int32Array(0), OTHER);
            state.otherwise = next;
            state.otherLiterals = literals;
            steps += OTHERWISE_STEPS;
          } else {
            const built = this.advance(state, closure.value, cp, kind, limit - steps - MISS_STEPS);
            steps += MISS_STEPS + built.cost;
            next = built.state;
          }
        }
        if (steps > limit) throw new StepBudgetExceeded();
        state = next;
        if (this.whole && state.kernel.length === 0) return -1;
      }
      const end = this.closure(state, END, limit - steps);
      steps += end.cost;
      if (steps > limit) throw new StepBudgetExceeded();
      return end.value.match;
    } finally {
      meter.steps = steps;
    }
  }

  /** The DFA state of these NFA states after a character of kind `before`, from the cache or new. */
  private intern(kernel: Int32Array, before: number): DfaState {
    let hash = (0x811c9dc5 ^ before) | 0;
    for (let i = 0; i < kernel.length; i += 1) hash = Math.imul(hash ^ (kernel[i] as number), 0x01000193);
    const bucket = this.cache.get(hash);
    if (bucket) {
      for (const known of bucket) if (known.before === before && sameInts(known.kernel, kernel)) return known;
    }
    if (this.cacheStates >= DFA_CACHE.states || this.cachedInts + kernel.length > DFA_CACHE.ints) {
      this.cache = new Map();
      this.cacheStates = 0;
      this.cachedInts = 0;
    }
    const state: DfaState = {
      kernel,
      before,
      closures: [undefined, undefined, undefined],
      ascii: undefined,
      other: undefined,
      otherwise: undefined,
      otherLiterals: undefined,
    };
    const fresh = this.cache.get(hash);
    if (fresh) fresh.push(state);
    else this.cache.set(hash, [state]);
    this.cacheStates += 1;
    this.cachedInts += kernel.length + 1;
    return state;
  }

  /** The states reachable from the kernel (and, searching, every pattern's start) without reading, before a character of kind `after`. */
  private closure(state: DfaState, after: number, allowed: number): { value: Closure; cost: number } {
    const known = state.closures[after];
    if (known) return { value: known, cost: 0 };
    const epoch = this.nextEpoch();
    const { stack, seen, op, out, out2 } = this;
    let top = 0;
    for (let i = state.kernel.length - 1; i >= 0; i -= 1) stack[top++] = state.kernel[i] as number;
    if (!this.whole) for (let i = this.starts.length - 1; i >= 0; i -= 1) stack[top++] = this.starts[i] as number;
    const chars: number[] = [];
    let match = -1;
    let cost = 0;
    const wordBefore = state.before === WORD;
    const wordAfter = after === WORD;
    while (top > 0) {
      const s = stack[--top] as number;
      if (seen[s] === epoch) continue;
      seen[s] = epoch;
      cost += VISIT_STEPS;
      // Stopped part-way, nothing cached: the check is refused anyway.
      if (cost > allowed) throw new StepBudgetExceeded();
      switch (op[s]) {
        case Op.Char:
          chars.push(s);
          break;
        case Op.Split:
          stack[top++] = out2[s] as number;
          stack[top++] = out[s] as number;
          break;
        case Op.Assert: {
          const kind = this.asserts[s];
          const holds = kind === 'start' ? state.before === START : kind === 'end' ? after === END : (wordBefore !== wordAfter) === (kind === 'word');
          if (holds) stack[top++] = out[s] as number;
          break;
        }
        default:
          if (!this.whole || after === END) {
            const index = this.matchOf[s] as number;
            if (match < 0 || index < match) match = index;
          }
      }
    }
    let literals: Set<number> | null = new Set();
    for (const c of chars) {
      const lit = this.lit[c] as number;
      if (lit < 0) {
        literals = null;
        break;
      }
      if (lit >= 0x80) literals.add(lit);
    }
    let index: Closure['index'] = null;
    let literalCount = 0;
    for (const c of chars) if ((this.lit[c] as number) >= 0) literalCount += 1;
    if (literalCount > INDEX_FROM) {
      const byLiteral = new Map<number, number[]>();
      const classes: number[] = [];
      for (const c of chars) {
        const lit = this.lit[c] as number;
        if (lit < 0) classes.push(c);
        else {
          const list = byLiteral.get(lit);
          if (list) list.push(c);
          else byLiteral.set(lit, [c]);
        }
      }
      index = { byLiteral, classes: Int32Array.from(classes) };
      cost += INDEX_STEPS * chars.length;
      if (cost > allowed) throw new StepBudgetExceeded();
    }
    const value: Closure = { chars: Int32Array.from(chars), literals, index, match };
    state.closures[after] = value;
    this.cachedInts += 2 * chars.length;
    return { value, cost };
  }

  /** The next DFA state from `state` on `cp`, built from its closure, and cached on `state`. */
  private advance(state: DfaState, closure: Closure, cp: number, kind: number, allowed: number): { state: DfaState; cost: number } {
    const epoch = this.nextEpoch();
    const { scratch, seen, lit: lits, out, predicateOf, answers, answeredIn } = this;
    let size = 0;
    let cost = 0;
    const named = closure.index?.byLiteral.get(cp);
    const chars = closure.index === null ? closure.chars : named === undefined ? closure.index.classes : [...named, ...closure.index.classes];
    for (let i = 0; i < chars.length; i += 1) {
      const s = chars[i] as number;
      const lit = lits[s] as number;
      let accepts: boolean;
      cost += TEST_STEPS;
      if (lit >= 0) accepts = lit === cp;
      else {
        const p = predicateOf[s] as number;
        if (answeredIn[p] !== epoch) {
          answeredIn[p] = epoch;
          answers[p] = (this.predicates[p] as Predicate)(cp) ? 1 : 2;
          cost += this.predicateCost[p] as number;
        }
        accepts = answers[p] === 1;
      }
      if (cost > allowed) throw new StepBudgetExceeded();
      const target = out[s] as number;
      if (accepts && seen[target] !== epoch) {
        seen[target] = epoch;
        scratch[size++] = target;
      }
    }
    // Sorting, hashing, comparing and keeping the new kernel.
    cost += KERNEL_STEPS * size;
    if (cost > allowed) throw new StepBudgetExceeded();
    const sorted = scratch.slice(0, size).sort();
    const next = this.intern(sorted, kind);
    if (cp < 0x80) (state.ascii ??= new Array<DfaState | undefined>(0x80))[cp] = next;
    else (state.other ??= new Map()).set(cp, next);
    this.cachedInts += 1;
    return { state: next, cost };
  }

  private nextEpoch(): number {
    this.epoch += 1;
    if (this.epoch === 0x7fffffff) {
      this.seen.fill(0);
      this.answeredIn.fill(0);
      this.epoch = 1;
    }
    return this.epoch;
  }
}

function sameInts(a: Int32Array, b: Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}
