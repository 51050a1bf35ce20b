/**
 * Upstream text (error messages, codes, task states) is untrusted: an upstream, or a proxy in front
 * of it, may echo the request's Authorization header or other credentials. Everything an upstream
 * says goes through `redactUpstreamText` before it is stored, logged or answered (docs/operators/channels.md).
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

/**
 * `text` with every one of `secrets` (the account's own credentials, matched literally) and every
 * generic credential shape replaced by `[redacted]`, control characters dropped and the result cut
 * to MAX_UPSTREAM_TEXT characters. Pure.
 */
export function redactUpstreamText(text: string, secrets: Iterable<string> = []): string {
  let out = text;
  // Longest first, so that a secret containing another is replaced whole.
  const literal = [...new Set(secrets)].filter((s) => s.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
  if (literal.length > 0) out = out.replace(new RegExp(literal.map(escapeRegExp).join('|'), 'g'), REDACTED_TEXT);
  for (const [pattern, replacement] of PATTERNS) {
    // Two calls because String.replace takes a string or a function, not their union.
    out = typeof replacement === 'string' ? out.replace(pattern, replacement) : out.replace(pattern, replacement);
  }
  // Upstream text may carry newlines or terminal escapes meant to forge log lines.
  out = out.replace(/[\u0000-\u001f\u007f]+/g, ' ');
  return out.length > MAX_UPSTREAM_TEXT ? `${out.slice(0, MAX_UPSTREAM_TEXT - 1)}…` : out;
}
