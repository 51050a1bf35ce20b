import type { Request } from 'express';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { checkClientIp } from '../keys/key-policy';
import { hashKey, isWellFormedKey } from '../keys/key-secret';
import { type CidrSet, clientAddress } from '../shared/cidr';
import { keyStatus } from '../keys/rules/key-usability';
import { directKeyLookup, type KeyLookup } from '../keys/key-cache';
import { type Clock, toIso } from '../shared/clock';
import { bearerToken } from './admin-auth';
import type { ClientPrincipal } from './principal';

/**
 * The `ApiKey` scheme: missing -> malformed/unknown -> disabled -> expired -> client address
 * outside the key's allowed_ips, each with its own
 * code. Malformed keys (bad shape or checksum) are refused without a database lookup.
 */
export function apiKeyGuard(deps: {
  db: Kysely<Database>;
  clock: Clock;
  trustedProxies?: CidrSet;
  /** By hash: a cache shared-invalidated across replicas on PostgreSQL + Redis (key-cache.ts), else one SELECT. */
  keyLookup?: KeyLookup;
}): (req: Request) => Promise<ClientPrincipal> {
  const keys = deps.keyLookup ?? directKeyLookup;
  return async (req) => {
    const token = bearerToken(req.get('authorization'));
    if (token === undefined) throw new ApiError('missing_api_key', 'Send your key as Authorization: Bearer hyai_...');
    if (!isWellFormedKey(token)) throw new ApiError('invalid_api_key', 'The API key is malformed or unknown.');
    const found = await keys.find(deps.db, hashKey(token));
    if (!found) throw new ApiError('invalid_api_key', 'The API key is malformed or unknown.');
    const status = keyStatus(found, deps.clock.now());
    if (status === 'disabled') throw new ApiError('key_disabled', 'This API key has been disabled.');
    if (status === 'expired') throw new ApiError('key_expired', `This API key expired at ${toIso(found.expires_at as number)}.`);
    checkClientIp(found.client.policy, clientAddress(req.socket.remoteAddress, req.get('x-forwarded-for'), deps.trustedProxies));
    return { kind: 'client', key: found.client };
  };
}
