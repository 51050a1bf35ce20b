import type { AdminScope } from '../admin-tokens/admin-token.model';
import type { ClientKey } from '../keys/key.model';

/** Who made a request, as the operation's `security` requirement established it. */
export type Principal = ClientPrincipal | AdminPrincipal | ServicePrincipal | AnonymousPrincipal;

/** A client key holder (`ApiKey` scheme). */
export interface ClientPrincipal {
  kind: 'client';
  key: ClientKey;
}

/**
 * The holder of the admin secret or of an admin token (`AdminSecret` scheme), or a person with a
 * Cloudflare Access JWT when CF_ACCESS_ADMIN_SCOPES is set (`AdminAccessJwt` scheme).
 */
export interface AdminPrincipal {
  kind: 'admin';
  /** What established it. */
  credential: 'admin_secret' | 'admin_token' | 'access' | 'console_session';
  /** `root` for the admin secret, the admin token's id, `access:<email>`, or `sso:<issuer>:<sub>:<email>`: what audit events name as the actor. */
  actor: 'root' | (string & {});
  /** What this principal may do: every scope for root, the token's scopes, or CF_ACCESS_ADMIN_SCOPES. */
  scopes: readonly AdminScope[];
  /** For an Access JWT: its email (or common_name) and expiry. */
  access?: AccessIdentity;
  /** For a console session (single sign-on): who signed in, where, and until when. */
  session?: SessionIdentity;
}

/** The person a console session is for. */
export interface SessionIdentity {
  sessionId: string;
  issuerId: string;
  subject: string;
  email: string | null;
  /** When the session ends if unused (or at its absolute end, whichever is first), epoch milliseconds. */
  expiresAt: number;
}

/**
 * An internal service with a Cloudflare-Access-style service token, or a person (or Access service
 * token) with a Cloudflare Access JWT.
 */
export interface ServicePrincipal {
  kind: 'service';
  /** The service token's client id, or the Access JWT's email (common_name for Access service tokens). */
  clientId: string;
}

/** Who a verified Access JWT names, and until when. */
export interface AccessIdentity {
  /** The JWT's `email`, or `common_name` for an Access service token. */
  name: string;
  /** The JWT's `exp`, in epoch milliseconds. */
  expiresAt: number;
}

/** An operation whose `security` is empty. */
export interface AnonymousPrincipal {
  kind: 'anonymous';
}

/** The principal each security scheme of the specs yields. */
export interface PrincipalBySecurityScheme {
  ApiKey: ClientPrincipal;
  AdminSecret: AdminPrincipal;
  AdminAccessJwt: AdminPrincipal;
  ConsoleSession: AdminPrincipal;
  ServiceTokenId: ServicePrincipal;
  ServiceTokenSecret: ServicePrincipal;
  CfAccessJwt: ServicePrincipal;
}
