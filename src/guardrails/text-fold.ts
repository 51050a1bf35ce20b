/**
 * Marks dropped before prompt rules compare text: the combining diacritical marks used over Latin,
 * Greek and Cyrillic letters (so `ñ`, `n` + U+0303 and `n` compare equal: an accent added to dodge a
 * blocked term does not), and default-ignorable code points (zero-width spaces and joiners, soft
 * hyphens, variation selectors: invisible characters slipped between letters). Other scripts' marks
 * (Indic vowel signs, Hebrew points) are kept: they change the word, not just its look.
 */
const DROPPED = /[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\p{Default_Ignorable_Code_Point}]/gu;

/**
 * The form both sides of a prompt rule are compared in: compatibility-normalised (NFKD: full-width
 * `Ｂａｄ` is `Bad`, the ligature `ﬁ` is `fi`), stripped of the marks above, then case-folded
 * (lower-, upper- then lower-case gives full folding: `ẞ`, `ß` and `SS` are all `ss`; the final
 * sigma is folded to `σ`, which lower-casing leaves context-dependent), normalised and stripped
 * again (folding can produce both), and composed (NFC). Idempotent, so folding a rule's term once when it is set and the
 * prompt once per request compare alike.
 */
export function foldText(text: string): string {
  const bare = text.normalize('NFKD').replace(DROPPED, '');
  const folded = bare.toLowerCase().toUpperCase().toLowerCase().replace(/ς/g, 'σ');
  return folded.normalize('NFKD').replace(DROPPED, '').normalize('NFC');
}
