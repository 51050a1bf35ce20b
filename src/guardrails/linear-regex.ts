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
  | { type: 'char'; test: Predicate }
  | { type: 'seq'; items: Node[] }
  | { type: 'alt'; options: Node[] }
  | { type: 'repeat'; node: Node; min: number; max: number }
  | { type: 'assert'; kind: AssertKind };

/** One code point tested with a native single-character expression: constant time per character. */
function nativeClass(source: string): Predicate {
  const re = new RegExp(`^${source}$`, 'u');
  return (cp) => re.test(String.fromCodePoint(cp));
}

const isDigit: Predicate = (cp) => cp >= 0x30 && cp <= 0x39;
const isWord: Predicate = (cp) => isDigit(cp) || (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a) || cp === 0x5f;
const isSpace = nativeClass('\\s');
const isLineTerminator: Predicate = (cp) => cp === 0x0a || cp === 0x0d || cp === 0x2028 || cp === 0x2029;
const not =
  (test: Predicate): Predicate =>
  (cp) =>
    !test(cp);

const CLASS_ESCAPES: Record<string, Predicate> = { d: isDigit, D: not(isDigit), w: isWord, W: not(isWord), s: isSpace, S: not(isSpace) };
const CONTROL_ESCAPES: Record<string, number> = { n: 0x0a, r: 0x0d, t: 0x09, f: 0x0c, v: 0x0b };
const SYNTAX_CHARACTERS = new Set('^$\\.*+?()[]{}|/-');

/** The single code point upper-cased, when that is one code point (folded text is lower-case). */
function upperOf(cp: number): number | undefined {
  const upper = String.fromCodePoint(cp).toUpperCase();
  const first = upper.codePointAt(0);
  return first !== undefined && upper.length === String.fromCodePoint(first).length ? first : undefined;
}

/** A literal of the pattern as the nodes of its folded form (which may be several code points, or none). */
function literal(cp: number): Node {
  const folded = codePoints(foldText(String.fromCodePoint(cp)));
  const items: Node[] = folded.map((f) => ({ type: 'char', test: (x: number) => x === f }));
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
    return negated ? not(matches) : matches;
  }
}

const Op = { Char: 0, Split: 1, Assert: 2, Match: 3 } as const;
type Op = (typeof Op)[keyof typeof Op];

interface State {
  op: Op;
  test?: Predicate;
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
        return this.add({ op: Op.Char, test: node.test, out: next, out2: -1 });
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

/** Counts a matcher's work: state visits and character tests (tests use it instead of timings). */
export interface StepMeter {
  steps: number;
}

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
