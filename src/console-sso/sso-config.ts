import { z } from 'zod';
import { ALL_ADMIN_SCOPES, type AdminScope } from '../admin-tokens/admin-token.model';
import { ConfigError } from '../config/config-error';

/** One OpenID Provider the console may sign people in with (an entry of CONSOLE_OIDC_ISSUERS). */
export interface SsoIssuerConfig {
  /** Short name in the sign-in URL and in audit actors (`sso:<id>:...`). */
  id: string;
  /** What the sign-in page shows. */
  name: string;
  /** The issuer identifier; discovery reads `<issuer>/.well-known/openid-configuration`. */
  issuer: string;
  clientId: string;
  /** Absent: a public client (PKCE only, no client authentication). */
  clientSecret?: string;
  /** Requested scopes; `openid` is always among them. */
  scopes: readonly string[];
  /** The ID token claim holding the person's groups or roles (a string or an array of strings). */
  groupsClaim: string;
  /** Claim value -> admin scopes; a person holds the union over their values, nothing by default. */
  scopeMap: ReadonlyMap<string, readonly AdminScope[]>;
}

export interface ConsoleSsoConfig {
  issuers: readonly SsoIssuerConfig[];
  /** A session unused this long ends. */
  idleMs: number;
  /** A session ends this long after its sign-in. */
  maxAgeMs: number;
}

const issuerEntry = z
  .object({
    id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'lower-case letters, digits and dashes, at most 32'),
    name: z.string().min(1).max(100).optional(),
    issuer: z.url(),
    client_id: z.string().min(1),
    client_secret: z.string().min(1).optional(),
    scopes: z.array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/)).optional(),
    groups_claim: z.string().min(1).optional(),
    scope_map: z.record(z.string(), z.array(z.string())),
  })
  .strict();

/** Loopback hosts, the only ones an `http://` issuer may name, and only outside production (tests, development). */
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * CONSOLE_OIDC_ISSUERS parsed and checked: undefined when unset. Every problem is one ConfigError
 * line naming the entry, so a mistyped scope stops startup instead of granting less than meant.
 */
export function readConsoleSso(raw: string | undefined, lifetimes: { idleMinutes: number; maxHours: number }, nodeEnv: string): ConsoleSsoConfig | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    throw new ConfigError(`CONSOLE_OIDC_ISSUERS is not JSON: ${(error as Error).message}`);
  }
  const parsed = z.array(issuerEntry).min(1).safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`CONSOLE_OIDC_ISSUERS${issue?.path.map((part) => `[${JSON.stringify(part)}]`).join('') ?? ''}: ${issue?.message ?? 'invalid'}`);
  }
  const seen = new Set<string>();
  const issuers = parsed.data.map((entry): SsoIssuerConfig => {
    const where = `CONSOLE_OIDC_ISSUERS "${entry.id}"`;
    if (seen.has(entry.id)) throw new ConfigError(`${where}: the id is used twice`);
    seen.add(entry.id);
    const url = new URL(entry.issuer);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname) && nodeEnv !== 'production')) {
      throw new ConfigError(`${where}: the issuer must be an https URL (got ${entry.issuer})`);
    }
    const scopeMap = new Map<string, AdminScope[]>();
    for (const [value, scopes] of Object.entries(entry.scope_map)) {
      const unknown = scopes.find((scope) => !(ALL_ADMIN_SCOPES as readonly string[]).includes(scope));
      if (unknown !== undefined)
        throw new ConfigError(`${where}: scope_map["${value}"] names "${unknown}", not an admin scope (${ALL_ADMIN_SCOPES.join(', ')})`);
      scopeMap.set(value, scopes as AdminScope[]);
    }
    const scopes = entry.scopes ?? ['openid', 'email', 'profile'];
    return {
      id: entry.id,
      name: entry.name ?? entry.id,
      issuer: entry.issuer,
      clientId: entry.client_id,
      ...(entry.client_secret === undefined ? {} : { clientSecret: entry.client_secret }),
      scopes: scopes.includes('openid') ? scopes : ['openid', ...scopes],
      groupsClaim: entry.groups_claim ?? 'groups',
      scopeMap,
    };
  });
  return { issuers, idleMs: lifetimes.idleMinutes * 60_000, maxAgeMs: lifetimes.maxHours * 3_600_000 };
}

/** The admin scopes a person's claim values grant: the union of the mapped ones, in the scopes' order. */
export function scopesFor(issuer: SsoIssuerConfig, claim: unknown): AdminScope[] {
  const values = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim.filter((v): v is string => typeof v === 'string') : [];
  const granted = new Set<AdminScope>(values.flatMap((value) => issuer.scopeMap.get(value) ?? []));
  return ALL_ADMIN_SCOPES.filter((scope) => granted.has(scope));
}
