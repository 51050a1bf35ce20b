/**
 * A text cell starting with one of these is read as a formula by spreadsheet programs (OWASP, CSV
 * Injection): a key's owner or metadata value could plant one in whoever opens the export.
 */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * RFC 4180 CSV: CRLF line ends; a field with a comma, quote or line break is quoted, its quotes doubled.
 * A text cell that a spreadsheet would read as a formula gets a leading `'`, which makes it text there;
 * numbers stay numbers (a negative count is not a formula).
 */
export function csvField(value: string | number | null): string {
  if (value === null) return '';
  const text = typeof value === 'string' && FORMULA_START.test(value) ? `'${value}` : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvDocument(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number | null>>): string {
  return [header, ...rows].map((row) => row.map(csvField).join(',')).join('\r\n') + '\r\n';
}
