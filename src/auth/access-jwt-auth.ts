import type { Request } from 'express';
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWSHeaderParameters, jwtVerify } from 'jose';
import type { Logger } from 'pino';
import type { AccessJwtConfig } from '../config/config';
import { ApiError } from '../errors/api-error';
import type { Clock } from '../shared/clock';
import type { AccessIdentity, ServicePrincipal } from './principal';

type KeyResolver = ReturnType<typeof createLocalJWKSet>;

export interface AccessKeySetOptions {
  /** Keys older than this are refetched before use (Cloudflare rotates every 6 weeks, old keys live 7 days). */
  maxAgeMs: number;
  /** A JWT with an unknown `kid` refetches the keys (a rotation), at most once per this interval. */
  refetchCooldownMs: number;
  /** Deadline of one JWKS request. */
  timeoutMs: number;
  /** Largest JWKS body read (a team's holds a few keys, about 2 kB); a larger one is refused. */
  maxBytes: number;
}

const DEFAULT_KEY_SET_OPTIONS: AccessKeySetOptions = { maxAgeMs: 10 * 60_000, refetchCooldownMs: 30_000, timeoutMs: 5_000, maxBytes: 1024 * 1024 };

export class KeysUnavailable extends Error {}

/**
 * The body as text, refused (and the download cancelled) past `maxBytes`: read while streaming, so
 * a hostile or broken endpoint cannot make the gateway buffer an unbounded body.
 */
async function boundedText(response: Response, maxBytes: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body?.cancel();
    throw new Error(`JWKS of ${declared} bytes, over the ${maxBytes} byte limit`);
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw new Error(`JWKS over the ${maxBytes} byte limit`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The team's JWKS, cached. An unknown `kid` means the keys rotated: fetch again, but not more than
 * once per cooldown (as every fetch), so a flood of forged kids cannot turn into a flood of requests
 * to Cloudflare. When a refetch fails, the keys already held stay in use.
 */
export class AccessKeySet {
  private keys: { resolve: KeyResolver; fetchedAt: number } | undefined;
  private lastFetchAt = Number.NEGATIVE_INFINITY;
  private fetching: Promise<void> | undefined;

  constructor(
    private readonly url: string,
    private readonly clock: Clock,
    private readonly logger?: Logger,
    private readonly options: AccessKeySetOptions = DEFAULT_KEY_SET_OPTIONS,
  ) {}

  /** For jose's jwtVerify. */
  readonly keyFor = async (header: JWSHeaderParameters, token: Parameters<KeyResolver>[1]): Promise<Awaited<ReturnType<KeyResolver>>> => {
    const now = this.clock.now();
    const stale = !this.keys || now - this.keys.fetchedAt >= this.options.maxAgeMs;
    // Failed fetches are rate-limited too: while Cloudflare is unreachable, requests do not each retry.
    if (stale && now - this.lastFetchAt >= this.options.refetchCooldownMs) await this.refresh();
    try {
      return await this.held().resolve(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey) || this.clock.now() - this.lastFetchAt < this.options.refetchCooldownMs) throw error;
      await this.refresh();
      return this.held().resolve(header, token);
    }
  };

  private held(): { resolve: KeyResolver } {
    if (!this.keys) throw new KeysUnavailable();
    return this.keys;
  }

  /** One fetch at a time; every caller waiting for it shares its outcome. */
  private refresh(): Promise<void> {
    this.fetching ??= this.fetchKeys().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  private async fetchKeys(): Promise<void> {
    this.lastFetchAt = this.clock.now();
    try {
      const response = await fetch(this.url, { signal: AbortSignal.timeout(this.options.timeoutMs), redirect: 'error' });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const jwks = JSON.parse(await boundedText(response, this.options.maxBytes)) as JSONWebKeySet;
      this.keys = { resolve: createLocalJWKSet(jwks), fetchedAt: this.clock.now() };
    } catch (error) {
      this.logger?.warn({ err: error, jwks_url: this.url }, 'could not fetch the Cloudflare Access signing keys');
      // Stale keys beat none: an Access outage should not lock everyone out while they still verify.
      if (!this.keys) throw new KeysUnavailable();
    }
  }
}

/** Why a JWT was refused, for the message (which claim failed; never the token itself). */
function reasonOf(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'it has expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.reason === 'missing') return `it has no ${error.claim} claim`;
    if (error.claim === 'aud') return 'its audience is not this application';
    if (error.claim === 'iss') return 'its issuer is not this team';
    return `its ${error.claim} claim is not acceptable`;
  }
  if (error instanceof errors.JWKSNoMatchingKey) return 'no signing key of the team has its key id';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'its signature does not verify';
  if (error instanceof errors.JOSEAlgNotAllowed) return 'it is not signed with RS256';
  return 'it is malformed';
}

export const ACCESS_JWT_HEADER = 'cf-access-jwt-assertion';

/**
 * Verifies Cloudflare Access JWTs: RS256 against the team's JWKS, `aud` = one of the application's
 * AUD tags, `iss` = the team domain, with an `exp`, not expired (by the gateway's clock). One per
 * process, shared by every listener, so the team's keys are cached and fetched once.
 */
export class AccessJwtVerifier {
  private readonly keySet: AccessKeySet;

  constructor(
    readonly config: AccessJwtConfig,
    private readonly clock: Clock,
    logger?: Logger,
  ) {
    this.keySet = new AccessKeySet(config.jwksUrl, clock, logger);
  }

  async verify(token: string, audiences: readonly string[]): Promise<AccessIdentity> {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, this.keySet.keyFor, {
        issuer: this.config.issuer,
        audience: [...audiences],
        algorithms: ['RS256'],
        // jose only checks exp when present; a JWT without one would be valid forever.
        requiredClaims: ['exp'],
        currentDate: new Date(this.clock.now()),
      }));
    } catch (error) {
      if (error instanceof KeysUnavailable) throw new ApiError('access_jwks_unavailable', 'Cannot fetch the Cloudflare Access signing keys; retry shortly.');
      throw new ApiError('invalid_access_jwt', `The Cf-Access-Jwt-Assertion is not valid here: ${reasonOf(error)}.`);
    }
    const name = [payload.email, payload.common_name].find((value): value is string => typeof value === 'string' && value.length > 0);
    if (!name) throw new ApiError('invalid_access_jwt', 'The Cf-Access-Jwt-Assertion is not valid here: it names no email or common_name.');
    return { name, expiresAt: (payload.exp as number) * 1000 };
  }
}

/**
 * The `CfAccessJwt` scheme of the internal API: a valid Access JWT for CF_ACCESS_AUD. The identity
 * is the JWT's `email`, or `common_name` for an Access service token.
 */
export function accessJwtGuard(deps: { verifier: AccessJwtVerifier | undefined }): (req: Request) => Promise<ServicePrincipal> {
  return async (req) => {
    const token = req.get(ACCESS_JWT_HEADER);
    if (!token) throw new ApiError('missing_service_token', 'Send CF-Access-Client-Id and CF-Access-Client-Secret, or come through Cloudflare Access.');
    if (!deps.verifier) {
      throw new ApiError('invalid_access_jwt', 'Cloudflare Access JWTs are not accepted here (CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD are not set).');
    }
    const identity = await deps.verifier.verify(token, deps.verifier.config.audiences);
    return { kind: 'service', clientId: identity.name };
  };
}
