import { type Command, InvalidArgumentError } from 'commander';

/** Option parsers and helpers shared by every resource module of the CLI. */

export function wholeNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('must be a whole number');
  return n;
}

/** A whole number that may be negative (e.g. a channel priority). */
export function integer(value: string): number {
  const n = Number(value);
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('must be a whole number');
  return n;
}

/** `a,b,c` as a non-empty list; `what` names the items in the error. */
export function commaList(what: string): (value: string) => string[] {
  return (value) => {
    const items = value
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);
    if (items.length === 0) throw new InvalidArgumentError(`must name at least one ${what}`);
    return items;
  };
}

/** Comma-separated whole numbers (`80,100`); an empty string is the empty list. */
export function numberList(value: string): number[] {
  return value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .map(wholeNumber);
}

/** An ISO 8601 time, normalized. */
export function timestamp(value: string): string {
  if (Number.isNaN(Date.parse(value))) throw new InvalidArgumentError('must be an ISO 8601 time (2027-01-31T00:00:00Z)');
  return new Date(value).toISOString();
}

/** For options that repeat: collects every occurrence (`--model a --model b`). */
export function repeatable<T>(parse: (value: string) => T): (value: string, previous: T[] | undefined) => T[] {
  return (value, previous) => [...(previous ?? []), parse(value)];
}

/** The route with the given parameters as its query string (only those set); name them as the spec does, one by one (a command's options also hold --json). */
export function withQuery(route: string, query: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.set(name, String(value));
  return params.size > 0 ? `${route}?${params}` : route;
}

/** `--enable` / `--disable` as the `status` field of an update body (`on` is the enabled status's name). */
export function enableDisable<On extends string>(command: Command, options: { enable?: boolean; disable?: boolean }, on: On): { status?: On | 'disabled' } {
  if (options.enable && options.disable) command.error('error: --enable and --disable contradict each other', { exitCode: 2 });
  if (options.enable) return { status: on };
  if (options.disable) return { status: 'disabled' };
  return {};
}

/** Refuses an update that changes nothing (exit 2), before any call. */
export function requireChange(command: Command, body: object): void {
  if (Object.keys(body).length === 0) command.error('error: nothing to change: give at least one option (see --help)', { exitCode: 2 });
}

/**
 * "No limit" / "never" from the command line. Commander turns a parser's null into '', so a
 * parser returns this marker instead and `defined` makes it the JSON null the API expects.
 */
class Clear {
  readonly clear = true;
}
export const CLEAR = new Clear();
export type Clearable<T> = T | Clear;

/** A parser that also takes `word` (e.g. "none") for null. */
export function orClear<T>(word: string, parse: (value: string) => T): (value: string) => Clearable<T> {
  return (value) => (value === word ? CLEAR : parse(value));
}

type Cleared<T> = { [K in keyof T]?: Clear extends T[K] ? Exclude<T[K], Clear | undefined> | null : Exclude<T[K], undefined> };

/** Only the entries whose value is set, CLEAR as null: `defined({ a: undefined, b: 1, c: CLEAR })` is `{ b: 1, c: null }`. */
export function defined<T extends Record<string, unknown>>(fields: T): Cleared<T> {
  return Object.fromEntries(
    Object.entries(fields)
      .filter(([, value]) => value !== undefined)
      .map(([name, value]) => [name, value === CLEAR ? null : value]),
  ) as Cleared<T>;
}

/** `<resource> <name> <id>`: a command that takes only an id; `run` calls the API and prints. */
export function idCommand(parent: Command, name: string, description: string, idHelp: string, run: (id: string, command: Command) => Promise<void>): Command {
  return parent
    .command(name)
    .description(description)
    .argument('<id>', idHelp)
    .action((id: string, _options: unknown, command: Command) => run(id, command));
}

/** --limit and --cursor of a cursor-paginated list (`what`: the records, e.g. "keys"). */
export function pageOptions(command: Command, what: string): Command {
  return command.option('--limit <n>', `${what} per page`, wholeNumber).option('--cursor <cursor>', 'the next_cursor of a previous page');
}
