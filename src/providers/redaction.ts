/**
 * Upstream text (error messages, codes, task states) is untrusted: an upstream, or a proxy in front
 * of it, may echo the request's Authorization header or other credentials, or quote the request's
 * prompt. Everything an upstream (or a moderation hook) says goes through `redactUpstreamText` before
 * it is stored, logged or answered (docs/operators/channels.md, docs/operators/security.md).
 */

/** Longest upstream-derived text kept (messages, `disabled_reason`); the rest is cut. */
export const MAX_UPSTREAM_TEXT = 500;

export const REDACTED_TEXT = '[redacted]';

/** Shorter secrets are not redacted by value: they would blank out ordinary words. */
const MIN_SECRET_LENGTH = 6;

/**
 * Credential shapes redacted whatever account they belong to: authorization schemes, `name=value`
 * and `name: value` forms (the name is kept: `api_key=[redacted]`), known key formats, then long
 * opaque runs.
 */
const PATTERNS: Array<[RegExp, string | ((match: string) => string)]> = [
  // Authorization schemes: Bearer/Basic tokens, and Volcengine/AWS HMAC headers (Credential=AK/..., Signature=hex).
  [/\b(Bearer)\s+[^\s"',;]+/gi, `$1 ${REDACTED_TEXT}`],
  [/\b(Basic)\s+[A-Za-z0-9+/=]{8,}/g, `$1 ${REDACTED_TEXT}`],
  [
    /\b(api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?access[_-]?key|[_-]?key)?|client[_-]?secret|password|passwd|token|access[_-]?token|auth(?:orization)?|credential|signature|x-api-key)(["']?\s*[:=]\s*["']?)[^\s"',;&}]+/gi,
    `$1$2${REDACTED_TEXT}`,
  ],
  // OpenAI-style and this gateway's own key formats.
  [/\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}/g, REDACTED_TEXT],
  [/\bhy(?:ai|adm)_[A-Za-z0-9_]{8,}/g, REDACTED_TEXT],
  // Access key ids (Volcengine AKLT..., AWS AKIA/ASIA...).
  [/\b(?:AKLT|AKTP|AKIA|ASIA)[A-Za-z0-9+/=_-]{12,}/g, REDACTED_TEXT],
  // Long opaque runs of letters and digits (secret access keys, base64 tokens): at least 32
  // characters mixing both, so that words, numbers and hyphenated ids stay readable.
  [/[A-Za-z0-9+/_=]{32,}/g, (run) => (/[A-Za-z]/.test(run) && /[0-9]/.test(run) ? REDACTED_TEXT : run)],
];

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** What a quoted prompt (or a piece of one) is replaced by. */
export const REDACTED_PROMPT = '[prompt]';

/** Prompts shorter than this (not counting whitespace) are not removed by value: they would blank out ordinary words. */
const MIN_QUOTED_PROMPT_LENGTH = 6;

/**
 * A piece of a longer prompt this long (not counting whitespace) is removed wherever it appears: an
 * upstream that quotes only part of the prompt (its start, before its own cut) leaves no run of
 * the prompt this long. About three words.
 */
const PROMPT_WINDOW = 16;

/**
 * Characters that do not count when a prompt is looked for: whitespace, controls and invisible format
 * characters (an upstream may change, drop or add them). Printable ASCII is decided without the regex.
 */
const IGNORED = /[\s\p{Cc}\p{Cf}]/u;

function ignored(text: string, index: number): boolean {
  const code = text.charCodeAt(index);
  if (code > 0x20 && code < 0x7f) return false;
  if (code <= 0x20 || code === 0x7f) return true;
  // A surrogate pair is one character (the format characters U+E0000-E007F are pairs).
  const high = code >= 0xd800 && code <= 0xdbff && index + 1 < text.length;
  return IGNORED.test(high ? text.slice(index, index + 2) : text.charAt(index));
}

/** `text` without the characters IGNORED, and for each of its code units the index in `text` it came from. */
function squeeze(text: string): { squeezed: string; at: Int32Array } {
  const at = new Int32Array(text.length);
  const kept: string[] = [];
  let length = 0;
  let from = 0;
  for (let index = 0; index < text.length; index += 1) {
    if (!ignored(text, index)) {
      at[length++] = index;
      continue;
    }
    const pair = text.charCodeAt(index) >= 0xd800 && text.charCodeAt(index) <= 0xdbff ? 2 : 1;
    kept.push(text.slice(from, index));
    index += pair - 1;
    from = index + 1;
  }
  kept.push(text.slice(from));
  return { squeezed: kept.join(''), at: at.subarray(0, length) };
}

const HASH_BASE = 0x01000193;
let hashTop = 1;
for (let i = 1; i < PROMPT_WINDOW; i += 1) hashTop = Math.imul(hashTop, HASH_BASE);

/** A polynomial hash (mod 2^32) of each PROMPT_WINDOW-long window of `text`, rolled one code unit at a time. */
function windowHashes(text: string, visit: (start: number, hash: number) => void): void {
  let hash = 0;
  for (let index = 0; index < text.length; index += 1) {
    if (index >= PROMPT_WINDOW) hash = (hash - Math.imul(text.charCodeAt(index - PROMPT_WINDOW), hashTop)) | 0;
    hash = (Math.imul(hash, HASH_BASE) + text.charCodeAt(index)) | 0;
    if (index >= PROMPT_WINDOW - 1) visit(index - PROMPT_WINDOW + 1, hash);
  }
}

/** The distinct windows of `needle`, in an open-addressing table of their hashes and starts. */
class WindowTable {
  private readonly hashes: Int32Array;
  /** Start + 1; 0 is an empty slot. */
  private readonly starts: Int32Array;
  private readonly mask: number;

  constructor(private readonly needle: string) {
    let size = 16;
    while (size < needle.length * 2) size *= 2;
    this.hashes = new Int32Array(size);
    this.starts = new Int32Array(size);
    this.mask = size - 1;
    windowHashes(needle, (start, hash) => {
      let slot = hash & this.mask;
      for (; this.starts[slot] !== 0; slot = (slot + 1) & this.mask) {
        // A window the prompt repeats is kept once.
        if (this.hashes[slot] === hash && this.equal(needle, start, this.starts[slot]! - 1)) return;
      }
      this.hashes[slot] = hash;
      this.starts[slot] = start + 1;
    });
  }

  private equal(text: string, at: number, start: number): boolean {
    for (let offset = 0; offset < PROMPT_WINDOW; offset += 1) if (text.charCodeAt(at + offset) !== this.needle.charCodeAt(start + offset)) return false;
    return true;
  }

  /** Whether the window of `text` at `at` (whose hash is `hash`) is one of the prompt's. */
  has(text: string, at: number, hash: number): boolean {
    for (let slot = hash & this.mask; this.starts[slot] !== 0; slot = (slot + 1) & this.mask) {
      if (this.hashes[slot] === hash && this.equal(text, at, this.starts[slot]! - 1)) return true;
    }
    return false;
  }
}

/**
 * `text` with `prompt` replaced by `[prompt]` wherever it is quoted, whatever whitespace the quote
 * has (collapsed, re-wrapped, removed), and with every run of the prompt at least PROMPT_WINDOW
 * characters long (whitespace not counted) replaced too, so a quote cut short (by the upstream or
 * by MAX_UPSTREAM_TEXT on text kept before) still goes. Nothing is cut here. Linear in both lengths
 * (rolling hashes of the windows, each hit compared). Pure.
 */
export function redactPrompt(text: string, prompt: string): string {
  const { squeezed: needle } = squeeze(prompt);
  if (needle.length < MIN_QUOTED_PROMPT_LENGTH) return text;
  const { squeezed: hay, at } = squeeze(text);
  // [start, end) ranges of `hay` to remove.
  const ranges: Array<[number, number]> = [];
  if (needle.length <= PROMPT_WINDOW) {
    for (let found = hay.indexOf(needle); found !== -1; found = hay.indexOf(needle, found + needle.length)) ranges.push([found, found + needle.length]);
  } else if (hay.length >= PROMPT_WINDOW) {
    const windows = new WindowTable(needle);
    windowHashes(hay, (start, hash) => {
      if (!windows.has(hay, start, hash)) return;
      const last = ranges[ranges.length - 1];
      if (last !== undefined && last[1] >= start) last[1] = start + PROMPT_WINDOW;
      else ranges.push([start, start + PROMPT_WINDOW]);
    });
  }
  if (ranges.length === 0) return text;
  let out = '';
  let from = 0;
  for (const [start, end] of ranges) {
    // Whole characters: a window may start or end between the two code units of a surrogate pair.
    let cut = at[start]!;
    if (/[\uDC00-\uDFFF]/.test(text.charAt(cut))) cut -= 1;
    out += text.slice(from, cut) + REDACTED_PROMPT;
    from = at[end - 1]! + 1;
    if (/[\uDC00-\uDFFF]/.test(text.charAt(from))) from += 1;
  }
  return out + text.slice(from);
}

export interface RedactionOptions {
  /** The request's prompt: removed first, before anything changes the text's whitespace or cuts it. */
  prompt?: string;
  /** How long the result may be (MAX_UPSTREAM_TEXT unless said). */
  maxLength?: number;
}

/**
 * `text` with the request's prompt (`options.prompt`, see redactPrompt), every one of `secrets` (the
 * account's own credentials, matched literally) and every generic credential shape replaced, control
 * characters dropped and the result cut to `options.maxLength` (MAX_UPSTREAM_TEXT) characters, in
 * that order: the prompt goes before the text's whitespace changes or it is cut, so neither can
 * leave a piece of it behind. The one function every kept copy of upstream text goes through
 * (UpstreamError, a moderation hook's reason, the retention sweep over stored text). Pure.
 */
export function redactUpstreamText(text: string, secrets: Iterable<string> = [], options: RedactionOptions = {}): string {
  let out = options.prompt === undefined ? text : redactPrompt(text, options.prompt);
  // Longest first, so that a secret containing another is replaced whole.
  const literal = [...new Set(secrets)].filter((s) => s.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
  if (literal.length > 0) out = out.replace(new RegExp(literal.map(escapeRegExp).join('|'), 'g'), REDACTED_TEXT);
  for (const [pattern, replacement] of PATTERNS) {
    // Two calls because String.replace takes a string or a function, not their union.
    out = typeof replacement === 'string' ? out.replace(pattern, replacement) : out.replace(pattern, replacement);
  }
  // Upstream text may carry newlines or terminal escapes meant to forge log lines.
  out = out.replace(/[\u0000-\u001f\u007f]+/g, ' ');
  const max = options.maxLength ?? MAX_UPSTREAM_TEXT;
  return out.length > max ? `${out.slice(0, max - 1)}…` : out;
}
