/**
 * RFC 8785 (JSON Canonicalization Scheme) text of a parsed JSON value: members sorted by their
 * names' UTF-16 code units, no whitespace, numbers and strings as ECMAScript serialises them. Two
 * bodies that are the same JSON value (members in another order, other spacing or escapes) give
 * the same text. Bodies reach this with their nesting already bounded (base-app.ts).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const members = Object.keys(value)
    .sort()
    .map((name) => `${JSON.stringify(name)}:${canonicalJson((value as Record<string, unknown>)[name])}`);
  return `{${members.join(',')}}`;
}
