import type { Request } from 'express';
import type { ServiceToken } from '../config/config';
import { ApiError } from '../errors/api-error';
import { secretsEqual } from './credentials';
import type { ServicePrincipal } from './principal';

/**
 * The `ServiceTokenId` + `ServiceTokenSecret` requirement, like Cloudflare Access service tokens:
 * both headers must match one configured pair. Every pair is compared (in constant time), so timing
 * tells nothing about which.
 */
export function serviceTokenGuard(tokens: ServiceToken[]): (req: Request) => ServicePrincipal {
  return (req) => {
    const clientId = req.get('cf-access-client-id');
    const clientSecret = req.get('cf-access-client-secret');
    if (!clientId || !clientSecret) throw new ApiError('missing_service_token', 'Send CF-Access-Client-Id and CF-Access-Client-Secret.');
    let matched: string | undefined;
    for (const token of tokens) {
      const idMatches = secretsEqual(clientId, token.clientId);
      const secretMatches = secretsEqual(clientSecret, token.clientSecret);
      if (idMatches && secretMatches) matched = token.clientId;
    }
    if (!matched) throw new ApiError('invalid_service_token', 'The service token is not valid here.');
    return { kind: 'service', clientId: matched };
  };
}
