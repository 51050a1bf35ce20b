import type { AdminScope } from '../admin-tokens/admin-token.model';
import type { ClientKey } from '../keys/key.model';

/** Who made a request, as the operation's `security` requirement established it. */
export type Principal = ClientPrincipal | AdminPrincipal | ServicePrincipal | AnonymousPrincipal;

/** A client key holder (`ApiKey` scheme). */
export interface ClientPrincipal {
  kind: 'client';
  key: ClientKey;
}

/** The holder of the admin secret or of an admin token (`AdminSecret` scheme). */
export interface AdminPrincipal {
  kind: 'admin';
  /** `root` for the admin secret, else the admin token's id: what audit events name as the actor. */
  actor: 'root' | (string & {});
  /** What this principal may do: every scope for root, the token's scopes otherwise. */
  scopes: readonly AdminScope[];
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

/** An operation whose `security` is empty. */
export interface AnonymousPrincipal {
  kind: 'anonymous';
}

/** The principal each security scheme of the specs yields. */
export interface PrincipalBySecurityScheme {
  ApiKey: ClientPrincipal;
  AdminSecret: AdminPrincipal;
  ServiceTokenId: ServicePrincipal;
  ServiceTokenSecret: ServicePrincipal;
  CfAccessJwt: ServicePrincipal;
}
