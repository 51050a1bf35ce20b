import confusableData from 'unhomoglyph/data.json';

/**
 * Characters a reader does not see: default-ignorable code points (zero-width spaces and joiners,
 * soft hyphens, variation selectors, the tag characters U+E0000–E007F) and the interlinear
 * annotation controls U+FFF9–FFFB. An emoji sequence keeps its joiners and one presentation
 * selector per emoji (they draw the emoji, and carry no more than the emoji seen).
 */
const INVISIBLE_OR_EMOJI =
  /(\p{Extended_Pictographic}[\u{1f3fb}-\u{1f3ff}\ufe0e\ufe0f]?(?:\u200d\p{Extended_Pictographic}[\u{1f3fb}-\u{1f3ff}\ufe0e\ufe0f]?)*)|[\p{Default_Ignorable_Code_Point}\ufff9-\ufffb]/gu;
const ALL_ASCII = /^[\x00-\x7f]*$/;

/**
 * The prompt with its invisible characters removed (above). The one function for both sides of
 * "what is checked is what is sent": prompt rules fold this form (foldText calls it), and the
 * gateway sends and stores this form, so nothing hidden from the rules reaches the upstream.
 */
export function withoutInvisible(text: string): string {
  if (ALL_ASCII.test(text)) return text;
  return text.replace(INVISIBLE_OR_EMOJI, (_, emoji: string | undefined) => emoji ?? '');
}

/**
 * Marks dropped before prompt rules compare text: the combining diacritical marks used over Latin,
 * Greek and Cyrillic letters (so `ñ`, `n` + U+0303 and `n` compare equal: an accent added to dodge a
 * blocked term does not), the Cyrillic combining marks U+0483–0489. Other scripts' marks (Indic
 * vowel signs, Hebrew points) are kept: they change the word, not just its look.
 */
const MARKS = /[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]/gu;

/**
 * The form both sides of a prompt rule are compared in: without invisible characters, then
 * compatibility-normalised (NFKD: full-width `Ｂａｄ` is `Bad`, the ligature `ﬁ` is `fi`, 𝐛𝐚𝐝 is
 * `bad`), stripped of the marks above, then case-folded (lower-, upper- then lower-case gives full
 * folding: `ẞ`, `ß` and `SS` are all `ss`; the final sigma is folded to `σ`, which lower-casing leaves
 * context-dependent), normalised and stripped again (folding can produce both), and composed (NFC).
 * Idempotent, so folding a rule's term once when it is set and the prompt once per request compare
 * alike.
 */
export function foldText(text: string): string {
  if (ALL_ASCII.test(text)) return text.toLowerCase();
  const bare = withoutInvisible(text.normalize('NFKD')).replace(MARKS, '');
  const folded = bare.toLowerCase().toUpperCase().toLowerCase().replace(/ς/g, 'σ');
  return withoutInvisible(folded.normalize('NFKD')).replace(MARKS, '').normalize('NFC');
}

/**
 * Latin letters that confusables.txt leaves as prototypes of their own (small capitals and the
 * letters Cyrillic ones map to: `т` → `ᴛ`, `в` → `ʙ`, `к` → `ĸ`), mapped on to the ASCII letter
 * they read as once case is set aside, as folding sets it aside for everything else.
 */
const LATIN_LOOK_ALIKES: Record<string, string> = {
  ᴀ: 'a', ʙ: 'b', ᴄ: 'c', ᴅ: 'd', ᴇ: 'e', ꜰ: 'f', ɢ: 'g', ʜ: 'h', ɪ: 'i', ᴊ: 'j', ᴋ: 'k', ĸ: 'k', ʟ: 'l', ᴍ: 'm', ʍ: 'm', ɴ: 'n',
  ᴏ: 'o', ᴘ: 'p', ꞯ: 'q', ʀ: 'r', ꜱ: 's', ᴛ: 't', ᴜ: 'u', ᴠ: 'v', ᴡ: 'w', ʏ: 'y', ᴢ: 'z',
}; // prettier-ignore

/**
 * Each non-ASCII character's prototype, folded: Unicode's confusables.txt (UTS #39, as the
 * `unhomoglyph` package ships it, v13.0.0) for characters outside ASCII, then the Latin look-alikes
 * above. ASCII is taken as written: confusables.txt also pairs `rn` with `m` and `0` with `O`, and an
 * upstream reads those as the different words they are, so mapping them would only block innocent
 * prompts. On the BMP by index (PROTOTYPE_AT[cp] - 1 into PROTOTYPE_TEXT), beyond it in a map.
 */
const PROTOTYPE_TEXT: string[] = [];
const PROTOTYPE_AT = new Uint16Array(0x10000);
const ASTRAL_PROTOTYPES = new Map<number, string>();
(() => {
  const set = (cp: number, to: string) => {
    const folded = foldText(LATIN_LOOK_ALIKES[to] ?? to);
    if (cp > 0xffff) ASTRAL_PROTOTYPES.set(cp, folded);
    else {
      PROTOTYPE_TEXT.push(folded);
      PROTOTYPE_AT[cp] = PROTOTYPE_TEXT.length;
    }
  };
  for (const [from, to] of Object.entries(confusableData as Record<string, string>)) {
    const cp = from.codePointAt(0) as number;
    if (cp > 0x7f && from.length === String.fromCodePoint(cp).length) set(cp, to);
  }
  for (const [from, to] of Object.entries(LATIN_LOOK_ALIKES)) set(from.codePointAt(0) as number, to);
})();

/**
 * Capital letters outside ASCII that look like a Latin capital (Greek `Β` `Ε` `Η`, Cyrillic `Ѕ`
 * `І`), by that capital: folding would first make them lower-case letters that look like nothing
 * Latin (`β`, `ε`), so they are read before folding (UTS #39 maps `I` and `l` alike; here a capital
 * reads as `I`).
 */
const CAPITAL_LOOK_ALIKES = new Map<string, string>();
for (const [from, to] of Object.entries(confusableData as Record<string, string>)) {
  const cp = from.codePointAt(0) as number;
  if (cp > 0x7f && /^\p{Lu}$/u.test(from) && /^[A-Za-z]$/.test(to)) CAPITAL_LOOK_ALIKES.set(from, to === 'l' ? 'I' : to.toUpperCase());
}
const CAPITAL_LOOK_ALIKE = new RegExp(`[${[...CAPITAL_LOOK_ALIKES.keys()].join('')}]`, 'gu');

/**
 * The text folded (foldText) and its confusables skeleton (skeletonOf), the capitals above read
 * before folding. The skeleton is the folded string itself when nothing in it looks like something else.
 */
export function foldWithSkeleton(text: string): { folded: string; skeleton: string; foldedTwice: boolean } {
  const folded = foldText(text);
  const decomposed = text.normalize('NFKD');
  CAPITAL_LOOK_ALIKE.lastIndex = 0;
  if (!CAPITAL_LOOK_ALIKE.test(decomposed)) return { folded, skeleton: skeletonOf(folded), foldedTwice: false };
  const read = decomposed.replace(CAPITAL_LOOK_ALIKE, (c) => CAPITAL_LOOK_ALIKES.get(c) ?? c);
  return { folded, skeleton: skeletonOf(foldText(read)), foldedTwice: true };
}

/**
 * The confusables skeleton of folded text (UTS #39's skeleton, tailored as above): Cyrillic `а`,
 * Greek `ο`, small capital `ᴀ` and the like read as the Latin letter they look like (folded).
 * Blocked terms are matched on this form as well as on the folded one. Text without a character
 * to map is its own skeleton (the same string is returned).
 */
export function skeletonOf(folded: string): string {
  let out = '';
  let copied = 0;
  for (let i = 0; i < folded.length; i += 1) {
    const unit = folded.charCodeAt(i);
    if (unit < 0x80) continue;
    let prototype: string | undefined;
    let width = 1;
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < folded.length) {
      prototype = ASTRAL_PROTOTYPES.get(folded.codePointAt(i) as number);
      width = 2;
    } else {
      const at = PROTOTYPE_AT[unit] as number;
      prototype = at === 0 ? undefined : PROTOTYPE_TEXT[at - 1];
    }
    if (prototype !== undefined) {
      out += folded.slice(copied, i) + prototype;
      copied = i + width;
    }
    i += width - 1;
  }
  return copied === 0 ? folded : out + folded.slice(copied);
}
