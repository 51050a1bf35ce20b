/** Prints for people by default, and the API's JSON as it is with --json (for scripts). */
export interface Output {
  json: boolean;
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.join(',');
  return String(value);
}

/** A fixed-width table: one row per record, the given columns. */
export function table<T>(rows: T[], columns: Array<[heading: string, value: (row: T) => unknown]>): string {
  const cells = rows.map((row) => columns.map(([, value]) => cell(value(row))));
  const widths = columns.map(([heading], i) => Math.max(heading.length, ...cells.map((line) => (line[i] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns.map(([heading]) => heading.toUpperCase())), ...cells.map(line)].join('\n');
}

/** One record as `field: value` lines. */
export function record(fields: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(fields).map((name) => name.length));
  return Object.entries(fields)
    .map(([name, value]) => `${`${name}:`.padEnd(width + 1)} ${cell(value)}`)
    .join('\n');
}

export function print(output: Output, json: unknown, human: () => string): void {
  console.log(output.json ? JSON.stringify(json, null, 2) : human());
}

/** A list answer: a table of its `data` (and how to get the next page, when there is one), or the JSON. */
export function printPage<T>(
  output: Output,
  page: { data: T[]; next_cursor?: string | null },
  columns: Array<[heading: string, value: (row: T) => unknown]>,
): void {
  print(output, page, () => {
    const rows = table(page.data, columns);
    return page.next_cursor ? `${rows}\n\nmore: --cursor ${page.next_cursor}` : rows;
  });
}

/** After a delete (204, no body): a line for people; nothing with --json (the exit code says it). */
export function printDeleted(output: Output, id: string): void {
  if (!output.json) console.log(`deleted ${id}`);
}
