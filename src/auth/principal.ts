import type { ClientKey } from '../keys/key.model';

/** Who made a request, as the operation's `security` requirement established it. */
export type Principal = ClientPrincipal | AdminPrincipal | ServicePrincipal | AnonymousPrincipal;

/** A client key holder (`ApiKey` scheme). */
export interface ClientPrincipal {
  kind: 'client';
  key: ClientKey;
}

/** The holder of the admin secret (`AdminSecret` scheme). */
export interface AdminPrincipal {
  kind: 'admin';
  actor: 'root';
}

/** An internal service with a Cloudflare-Access-style service token. */
export interface ServicePrincipal {
  kind: 'service';
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
}
