import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { createRemoteJWKSet, errors as joseErrors, type JWTVerifyGetKey, jwtVerify } from 'jose';
import * as oidc from 'openid-client';
import type { Logger } from 'pino';
import { gatewayOperations } from '../../generated/gateway.operations';
import { type AdminScope, insufficientScope } from '../admin-tokens/admin-token.model';
import { type AuditContext, recordAuditEvent, withAuditEvent } from '../audit/audit-log';
import type { AdminPrincipal } from '../auth/principal';
import { ConfigError } from '../config/config-error';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import type { Clock } from '../shared/clock';
import { type ConsoleSsoConfig, type SsoIssuerConfig, scopesFor } from './sso-config';

/** How long a sign-in may take between its start and the issuer's redirect back. */
const LOGIN_TTL_MS = 10 * 60_000;
/** A session's last use is written at most this often (a write per request would be the cost of every console call). */
const TOUCH_EVERY_MS = 60_000;
/** Audit events store the actor in 200 characters. */
const MAX_ACTOR_LENGTH = 200;
/** What a request must send on a state-changing call made with the session's cookie. */
export const CSRF_HEADER = 'x-csrf-token';

const sha256 = (value: string): string => createHash('sha256').update(value).digest('hex');
const secret = (): string => randomBytes(32).toString('base64url');

function sameSecret(given: string, expectedHash: string): boolean {
  return timingSafeEqual(Buffer.from(sha256(given), 'hex'), Buffer.from(expectedHash, 'hex'));
}

const signInFailed = (reason: string): ApiError => new ApiError('sso_sign_in_failed', `Sign-in failed: ${reason}`);
const invalidSession = (reason: string): ApiError => new ApiError('invalid_console_session', `The console session ${reason}; sign in again.`);

/** One configured issuer, discovered. */
interface Issuer {
  config: SsoIssuerConfig;
  client: oidc.Configuration;
  /** The issuer's keys: fetched again whenever an ID token names a key id not among them (a rotation). */
  keys: JWTVerifyGetKey;
}

export interface StartedSignIn {
  location: string;
  /** The value of the browser-binding cookie: the `state` itself. */
  state: string;
}

export interface CompletedSignIn {
  sessionToken: string;
  csrfToken: string;
  /** Seconds the cookies should live: the session's absolute lifetime. */
  maxAgeSeconds: number;
}

/**
 * Console single sign-on with OpenID Connect: the authorization code flow (PKCE, state, nonce) with
 * openid-client, the ID token's signature checked against the issuer's JWKS with jose, and the
 * sessions it opens, kept in the database so that every replica honours a sign-out at once.
 */
export class ConsoleSso {
  private constructor(
    private readonly issuers: ReadonlyMap<string, Issuer>,
    private readonly settings: ConsoleSsoConfig,
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
  ) {}

  /** Discovers every issuer; one that cannot be discovered stops startup with one line. */
  static async start(settings: ConsoleSsoConfig, deps: { db: Kysely<Database>; clock: Clock; logger: Logger }): Promise<ConsoleSso> {
    const issuers = new Map<string, Issuer>();
    for (const config of settings.issuers) {
      let client: oidc.Configuration;
      try {
        client = await oidc.discovery(
          new URL(config.issuer),
          config.clientId,
          config.clientSecret,
          config.clientSecret === undefined ? oidc.None() : oidc.ClientSecretBasic(config.clientSecret),
          // http is allowed only for a loopback issuer outside production (sso-config.ts checked it).
          { timeout: 10, ...(config.issuer.startsWith('http:') ? { execute: [oidc.allowInsecureRequests] } : {}) },
        );
      } catch (error) {
        throw new ConfigError(`CONSOLE_OIDC_ISSUERS "${config.id}": discovery of ${config.issuer} failed: ${(error as Error).message}`);
      }
      const jwksUri = client.serverMetadata().jwks_uri;
      if (jwksUri === undefined) throw new ConfigError(`CONSOLE_OIDC_ISSUERS "${config.id}": ${config.issuer} publishes no jwks_uri`);
      // No cool-down: only an ID token the token endpoint itself answered (one per sign-in) can name
      // an unknown key, so a fetch per such token is bounded by the sign-ins.
      const keys = createRemoteJWKSet(new URL(jwksUri), { cooldownDuration: 0, cacheMaxAge: 10 * 60_000, timeoutDuration: 10_000 });
      issuers.set(config.id, { config, client, keys });
      deps.logger.info({ issuer: config.issuer, id: config.id }, 'console single sign-on issuer discovered');
    }
    return new ConsoleSso(issuers, settings, deps.db, deps.clock);
  }

  list(): { id: string; name: string }[] {
    return [...this.issuers.values()].map(({ config }) => ({ id: config.id, name: config.name }));
  }

  /** Keeps the sign-in's state and answers where to send the browser. */
  async begin(issuerId: string, origin: string): Promise<StartedSignIn> {
    const issuer = this.issuers.get(issuerId);
    if (!issuer) throw new ApiError('not_found', `No single sign-on issuer "${issuerId}" is configured.`);
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const verifier = oidc.randomPKCECodeVerifier();
    const redirectUri = `${origin}${gatewayOperations.completeConsoleSignIn.path}`;
    const now = this.clock.now();
    await this.db.deleteFrom('console_sso_logins').where('expires_at', '<', now).execute();
    await this.db
      .insertInto('console_sso_logins')
      .values({ state_hash: sha256(state), issuer_id: issuerId, code_verifier: verifier, nonce, redirect_uri: redirectUri, expires_at: now + LOGIN_TTL_MS })
      .execute();
    const location = oidc.buildAuthorizationUrl(issuer.client, {
      redirect_uri: redirectUri,
      scope: issuer.config.scopes.join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    return { location: location.href, state };
  }

  /**
   * The issuer's redirect back: the state used up first (so a replay of this URL, code and all, is
   * refused here), then the code exchanged and the ID token checked, then the session.
   */
  async complete(query: URLSearchParams, browserState: string | undefined, audit: Omit<AuditContext, 'actor'>): Promise<CompletedSignIn> {
    const state = query.get('state');
    if (state === null) throw signInFailed(query.get('error') === null ? 'the callback has no state.' : `the issuer answered ${query.get('error')}.`);
    const now = this.clock.now();
    const login = await this.db.deleteFrom('console_sso_logins').where('state_hash', '=', sha256(state)).returningAll().executeTakeFirst();
    if (!login || login.expires_at < now) throw signInFailed('this sign-in is unknown, used already or expired; start again.');
    if (browserState === undefined || browserState.length !== state.length || !sameSecret(browserState, sha256(state))) {
      throw signInFailed('this browser did not start this sign-in; start again.');
    }
    const error = query.get('error');
    if (error !== null) throw signInFailed(`the issuer answered ${error}${query.get('error_description') ? ` (${query.get('error_description')})` : ''}.`);
    const issuer = this.issuers.get(login.issuer_id);
    if (!issuer) throw signInFailed('its issuer is no longer configured.');

    const tokens = await this.exchange(issuer, query, login);
    const idToken = tokens.id_token;
    if (idToken === undefined) throw signInFailed('the issuer answered no ID token.');
    const claims = await this.verifyIdToken(issuer, idToken);
    const subject = claims.sub;
    const email = typeof claims.email === 'string' ? claims.email : null;
    const actor = `sso:${issuer.config.id}:${subject}${email === null ? '' : `:${email}`}`;
    if (actor.length > MAX_ACTOR_LENGTH) throw signInFailed('the ID token\'s "sub" and "email" are too long.');
    const context: AuditContext = { ...audit, actor };
    const groups = claims[issuer.config.groupsClaim] ?? null;
    const scopes = scopesFor(issuer.config, groups);
    if (scopes.length === 0) {
      await this.db.transaction().execute((trx) =>
        recordAuditEvent(
          trx,
          context,
          {
            action: 'console_session.refused',
            target: issuer.config.id,
            before: null,
            after: { subject, email, [issuer.config.groupsClaim]: groups, scopes: [] },
          },
          now,
        ),
      );
      throw new ApiError('sso_no_access', `${email ?? subject} signed in, but no value of their "${issuer.config.groupsClaim}" claim grants an admin scope.`);
    }

    const sessionToken = secret();
    const csrfToken = secret();
    const id = `ses_${randomBytes(16).toString('hex')}`;
    const expiresAt = now + this.settings.maxAgeMs;
    await withAuditEvent(this.db, context, now, async (trx) => {
      // Sessions past their end are of no use to anyone: each sign-in clears them.
      await trx.deleteFrom('console_sessions').where('expires_at', '<', now).execute();
      await trx
        .insertInto('console_sessions')
        .values({
          id,
          token_hash: sha256(sessionToken),
          csrf_hash: sha256(csrfToken),
          issuer_id: issuer.config.id,
          subject,
          email,
          scopes: JSON.stringify(scopes),
          id_token: idToken,
          created_at: now,
          last_seen_at: now,
          expires_at: expiresAt,
          revoked_at: null,
        })
        .execute();
      return {
        result: undefined,
        change: {
          action: 'console_session.created',
          target: id,
          before: null,
          after: { issuer: issuer.config.issuer, subject, email, scopes, expires_at: new Date(expiresAt).toISOString() },
        },
      };
    });
    return { sessionToken, csrfToken, maxAgeSeconds: Math.floor(this.settings.maxAgeMs / 1000) };
  }

  private async exchange(issuer: Issuer, query: URLSearchParams, login: { code_verifier: string; nonce: string; redirect_uri: string }) {
    const currentUrl = new URL(login.redirect_uri);
    currentUrl.search = query.toString();
    try {
      return await oidc.authorizationCodeGrant(issuer.client, currentUrl, {
        pkceCodeVerifier: login.code_verifier,
        expectedState: query.get('state') ?? undefined,
        expectedNonce: login.nonce,
        idTokenExpected: true,
      });
    } catch (error) {
      throw describeFailure(error);
    }
  }

  /** Signature by a key of the issuer's JWKS, `iss`, `aud`, `exp` on this gateway's clock (openid-client checked the nonce). */
  private async verifyIdToken(issuer: Issuer, idToken: string): Promise<{ sub: string; [claim: string]: unknown }> {
    try {
      const { payload } = await jwtVerify(idToken, issuer.keys, {
        issuer: issuer.client.serverMetadata().issuer,
        audience: issuer.config.clientId,
        currentDate: new Date(this.clock.now()),
        clockTolerance: 30,
        requiredClaims: ['exp', 'sub'],
      });
      return payload as { sub: string };
    } catch (error) {
      if (error instanceof joseErrors.JWKSTimeout || (error as Error).name === 'TypeError') {
        throw new ApiError('sso_issuer_unavailable', "Cannot fetch the issuer's signing keys; try again shortly.");
      }
      if (error instanceof joseErrors.JWTExpired) throw signInFailed('the ID token has expired.');
      if (error instanceof joseErrors.JWKSNoMatchingKey) throw signInFailed("the ID token is signed with a key the issuer's JWKS does not have.");
      if (error instanceof joseErrors.JWSSignatureVerificationFailed) throw signInFailed("the ID token's signature does not verify.");
      if (error instanceof joseErrors.JWTClaimValidationFailed) throw signInFailed(`the ID token's "${error.claim}" claim is not valid here.`);
      throw signInFailed(`the ID token is not valid (${(error as Error).message}).`);
    }
  }

  /**
   * The `ConsoleSession` credential: the cookie's session, live (not signed out, not idle past its
   * limit, not past its absolute end), holding the scopes asked for; a state-changing request must
   * also carry the session's CSRF token.
   */
  async authenticate(token: string, request: { method: string; csrfToken: string | undefined }, scopes: readonly string[]): Promise<AdminPrincipal> {
    const row = await this.db.selectFrom('console_sessions').selectAll().where('token_hash', '=', sha256(token)).executeTakeFirst();
    if (!row || row.revoked_at !== null) throw invalidSession('is unknown or signed out');
    const now = this.clock.now();
    if (now >= row.expires_at) throw invalidSession('has reached its maximum lifetime');
    if (now >= row.last_seen_at + this.settings.idleMs) throw invalidSession('ended after being unused');
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      if (request.csrfToken === undefined || !sameSecret(request.csrfToken, row.csrf_hash)) {
        throw new ApiError('csrf_token_invalid', 'A console session must send its CSRF token (the __Host-cgw_csrf cookie) as X-CSRF-Token on this request.');
      }
    }
    const held = JSON.parse(row.scopes) as AdminScope[];
    const lacking = scopes.find((scope) => !(held as readonly string[]).includes(scope));
    if (lacking !== undefined) throw insufficientScope(lacking, 'use');
    if (now - row.last_seen_at >= TOUCH_EVERY_MS) {
      await this.db.updateTable('console_sessions').set({ last_seen_at: now }).where('id', '=', row.id).where('last_seen_at', '<', now).execute();
    }
    const actor = `sso:${row.issuer_id}:${row.subject}${row.email === null ? '' : `:${row.email}`}`;
    return {
      kind: 'admin',
      credential: 'console_session',
      actor,
      scopes: held,
      session: {
        sessionId: row.id,
        issuerId: row.issuer_id,
        subject: row.subject,
        email: row.email,
        expiresAt: Math.min(row.expires_at, Math.max(now, row.last_seen_at) + this.settings.idleMs),
      },
    };
  }

  /** Revokes the session (every replica refuses it from the next request) and answers the issuer's end-session URL. */
  async signOut(sessionId: string, origin: string, audit: AuditContext): Promise<string | null> {
    const now = this.clock.now();
    const row = await withAuditEvent(this.db, audit, now, async (trx) => {
      const revoked = await trx
        .updateTable('console_sessions')
        .set({ revoked_at: now })
        .where('id', '=', sessionId)
        .where('revoked_at', 'is', null)
        .returning(['issuer_id', 'id_token'])
        .executeTakeFirst();
      return {
        result: revoked,
        change: revoked
          ? { action: 'console_session.revoked', target: sessionId, before: { revoked_at: null }, after: { revoked_at: new Date(now).toISOString() } }
          : null,
      };
    });
    const issuer = row ? this.issuers.get(row.issuer_id) : undefined;
    if (!row || !issuer || issuer.client.serverMetadata().end_session_endpoint === undefined) return null;
    return oidc.buildEndSessionUrl(issuer.client, {
      id_token_hint: row.id_token,
      post_logout_redirect_uri: `${origin}${gatewayOperations.getConsole.path}`,
    }).href;
  }
}

/** openid-client's refusals as the gateway's: the issuer unreachable is 503, anything it or its answer got wrong 400. */
function describeFailure(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof oidc.ResponseBodyError)
    return signInFailed(`the issuer refused the code: ${error.error}${error.error_description ? ` (${error.error_description})` : ''}.`);
  if (error instanceof oidc.AuthorizationResponseError) return signInFailed(`the issuer answered ${error.error}.`);
  const cause = (error as { cause?: unknown }).cause;
  const code = error instanceof oidc.ClientError ? error.code : undefined;
  // fetch's TypeError ("fetch failed"), by name: it may come from another realm than openid-client's
  // (a test runner's), which then wraps it as "something went wrong".
  const unreachable = (error as Error).name === 'TypeError' || (typeof cause === 'object' && cause !== null && (cause as Error).name === 'TypeError');
  if (unreachable || code === 'OAUTH_TIMEOUT' || code === 'OAUTH_ABORT') {
    return new ApiError('sso_issuer_unavailable', 'The single sign-on issuer cannot be reached; try again shortly.');
  }
  // openid-client's own message is generic ("unexpected JWT claim value encountered"); its cause says which.
  const detail = typeof cause === 'object' && cause !== null && 'message' in cause ? String(cause.message) : (error as Error).message;
  return signInFailed(`${detail.replace(/\.$/, '')}.`);
}
