import type { RequestHandler } from 'express';
import type { ServiceToken } from '../config/config';
import { ApiError } from '../errors/api-error';
import { secretsEqual } from './admin-auth';

/**
 * Guards the internal API like Cloudflare Access service tokens: both headers must match one
 * configured pair. Every pair is compared (in constant time), so timing tells nothing about which.
 */
export function serviceTokenAuth(tokens: ServiceToken[]): RequestHandler {
  return (req, res, next) => {
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
    res.locals.serviceClientId = matched;
    next();
  };
}
