import { z } from 'zod';
import { parseCidr } from '../shared/cidr';

/**
 * The types of environment variables: each parses a set value's text. Messages are predicates
 * ("must be ..."); the loader puts the variable's name in front of them.
 */
export type EnvType<T> = z.ZodType<T, string>;

/** What the schema knows about a variable besides its type and default. */
export interface EnvMeta {
  /** One line for the configuration reference. */
  description: string;
  /** true: masked in the startup log line; 'password': only the password of the URL is. */
  secret: boolean | 'password';
  /** Where the value lands in GatewayConfig (`*`: every element), so describeConfig masks it there. */
  field?: string;
  /** For the reference, where the default is decided at startup (or generated) rather than fixed. */
  defaultText?: string;
  /** An empty value is a value (an empty prefix or list), not "unset". */
  keepEmpty?: boolean;
}

export const envMeta = z.registry<EnvMeta>();

/** A variable's type with its default (if fixed): what `declareVariable` takes. */
export type DeclaredType = z.ZodType<unknown, string | undefined>;

/** Variables by name, each declared (`declareVariable`). */
export type EnvVariables = Readonly<Record<string, DeclaredType>>;

/** One variable: its type (with its default, if fixed), and what the reference and the log need. */
export function declareVariable<S extends DeclaredType>(type: S, meta: Omit<EnvMeta, 'secret'> & { secret?: EnvMeta['secret'] }): S {
  const schema: z.ZodType = type;
  envMeta.add(schema, { ...meta, secret: meta.secret ?? false });
  return type;
}

/** A conversion that refuses with a message (returns a string in `refused`), or gives the value. */
type Parsed<T> = { value: T } | { refused: string };

function parsed<T>(convert: (raw: string) => Parsed<T>): EnvType<T> {
  return z.string().transform((raw, ctx) => {
    const result = convert(raw);
    if ('refused' in result) {
      ctx.addIssue({ code: 'custom', message: result.refused, input: raw });
      return z.NEVER;
    }
    return result.value;
  });
}

export const text: EnvType<string> = z.string();

export function integer(min: number, max: number): EnvType<number> {
  return parsed<number>((raw) => {
    const value = Number(raw);
    return Number.isInteger(value) && value >= min && value <= max ? { value } : { refused: `must be an integer from ${min} to ${max}, got "${raw}"` };
  });
}

export function decimal(min: number, max: number): EnvType<number> {
  return parsed<number>((raw) => {
    const value = Number(raw);
    return raw.trim() !== '' && Number.isFinite(value) && value >= min && value <= max
      ? { value }
      : { refused: `must be a number from ${min} to ${max}, got "${raw}"` };
  });
}

export const boolean: EnvType<boolean> = parsed<boolean>((raw) => {
  if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return { value: true };
  if (['0', 'false', 'no'].includes(raw.toLowerCase())) return { value: false };
  return { refused: `must be true or false, got "${raw}"` };
});

/** `expected` words the allowed values in the message; "one of a, b, c" unless given. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T, expected = `one of ${values.join(', ')},`): EnvType<T[number]> {
  return z.enum(values, { error: (issue) => `must be ${expected} got "${String(issue.input)}"` });
}

export function minLength(length: number): EnvType<string> {
  return z.string().min(length, { error: `must be at least ${length} characters` });
}

export const httpUrl: EnvType<string> = parsed<string>((raw) => {
  try {
    const { protocol } = new URL(raw);
    if (protocol === 'http:' || protocol === 'https:') return { value: raw };
  } catch {
    // Not a URL at all: the same answer as another scheme.
  }
  return { refused: `must be an http(s) URL, got "${raw}"` };
});

/** Comma-separated, each entry trimmed, empty entries dropped. */
export const list: EnvType<string[]> = z.string().transform(splitList);

export function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
}

export const cidrList: EnvType<string[]> = parsed<string[]>((raw) => {
  const entries = splitList(raw);
  const bad = entries.filter((entry) => parseCidr(entry) === undefined);
  return bad.length === 0 ? { value: entries } : { refused: `must be comma-separated IP addresses or CIDRs, got "${bad.join(', ')}"` };
});

/** A sealing key: 64 hex characters or base64 of 32 bytes; undefined for anything else. */
export function sealingKey(raw: string): Buffer | undefined {
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  return key.length === 32 ? key : undefined;
}

export const sealingKeys: EnvType<Buffer[]> = parsed<Buffer[]>((raw) => {
  const keys = splitList(raw).map(sealingKey);
  return keys.every((key) => key !== undefined) ? { value: keys } : { refused: 'entries must each be 32 bytes, as 64 hex characters or base64' };
});

/** The URL with its password replaced, for logs and messages. */
export function maskUrl(raw: string): string {
  try {
    const parsed = new URL(raw);
    if (!parsed.password) return raw;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return raw;
  }
}

const DATABASE_URL_FORMS = 'a SQLite file path (./data/gateway.db), sqlite:<path>, or postgres://user:password@host:5432/database';

/**
 * A file path, `sqlite:<path>` or `postgres(ql)://`. Anything else with a scheme (`mysql://...`)
 * would otherwise become a SQLite file named after it.
 */
export const databaseUrl: EnvType<string> = parsed<string>((raw) => {
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(raw)?.[1]?.toLowerCase();
  if (scheme === undefined || scheme === 'sqlite') return { value: raw };
  if ((scheme === 'postgres' || scheme === 'postgresql') && raw.startsWith(`${scheme}://`)) return { value: raw };
  return { refused: `must be ${DATABASE_URL_FORMS}; got the unsupported scheme "${scheme}:"` };
});

export const redisUrl: EnvType<string> = parsed<string>((raw) =>
  /^rediss?:\/\//.test(raw) ? { value: raw } : { refused: `must be redis://host:6379 or rediss://...; got "${maskUrl(raw)}"` },
);

export const providerName: EnvType<string> = parsed<string>((raw) =>
  /^[a-z][a-z0-9_-]{0,31}$/.test(raw) && raw !== 'local' && raw !== 'jimeng'
    ? { value: raw }
    : { refused: `must be a lowercase name other than local and jimeng, got "${raw}"` },
);
