import type { Request } from 'express';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { checkClientIp } from '../keys/key-policy';
import { hashKey, isWellFormedKey } from '../keys/key-secret';
import { type CidrSet, clientAddress } from '../shared/cidr';
import { keyRefused } from '../keys/rules/key-refusal';
import { keyStatus } from '../keys/rules/key-usability';
import { directKeyLookup, type KeyLookup } from '../keys/key-cache';
import type { Clock } from '../shared/clock';
import { bearerToken } from './credentials';
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
    if (!isWellFormedKey(token)) throw keyRefused('unknown');
    const found = await keys.find(deps.db, hashKey(token));
    if (!found) throw keyRefused('unknown');
    const status = keyStatus(found, deps.clock.now());
    if (status !== 'active') throw keyRefused(status, found);
    checkClientIp(found.client.policy, clientAddress(req.socket.remoteAddress, req.get('x-forwarded-for'), deps.trustedProxies));
    return { kind: 'client', key: found.client };
  };
}
