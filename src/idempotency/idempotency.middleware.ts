import { createHash, randomBytes } from 'node:crypto';
import os from 'node:os';
import type { RequestHandler, Response } from 'express';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import type { Clock } from '../shared/clock';
import { RenewedSet } from '../shared/renewed-set';
import {
  type IdempotencyClaim,
  claimIdempotencyKey,
  completeIdempotencyRecord,
  deleteIdempotencyRecord,
  findIdempotencyRecord,
  renewIdempotencyClaims,
  takeOverIdempotencyClaim,
} from './idempotency.repository';
import { canonicalJson } from './canonical-json';
import { parsePrefer } from '../http/prefer';
import { openResponse, sealResponse } from './response-sealing';

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/** A claim's lease when the gateway does not say (it passes IDEMPOTENCY_LEASE_MS). */
const DEFAULT_LEASE_MS = 30_000;

/** Outcomes worth replaying. 429 and 5xx are not kept: a retry should run again (nothing was charged). */
function keepable(status: number): boolean {
  return status < 500 && status !== 429 && status !== 409;
}

function scopeOf(res: Response): string {
  const principal = res.locals.principal;
  if (principal?.kind === 'client') return `key:${principal.key.id}`;
  if (principal?.kind === 'service') return `service:${principal.clientId}`;
  // Each admin token has its own scope: a token must not replay what root (or another token) created.
  if (principal?.kind === 'admin' && principal.actor !== 'root') return `admin:${principal.actor}`;
  return 'admin';
}

/**
 * What a retry must repeat: method, path, the body as a JSON value and whether it asked to be
 * answered asynchronously (`Prefer: respond-async` or `wait=N`): a 202 snapshot is no answer to a
 * synchronous request, nor a 200 to an asynchronous one. A synchronous request hashes as it always
 * did, so records stored before this rule still replay.
 */
export function requestFingerprint(method: string, path: string, body: unknown, prefer: string | undefined): string {
  const mode = parsePrefer(prefer) ? '\nprefer: async' : '';
  return createHash('sha256')
    .update(`${method} ${path}\n${canonicalJson(body ?? null)}${mode}`)
    .digest('hex');
}

/**
 * Stripe-style Idempotency-Key, scoped to the caller: the first response is stored (before it
 * is sent) and replayed for a retry with the same body and the same (a)synchronous form; another is 422, and a retry while the
 * first is still running is 409. Bodies are compared as JSON values (canonical-json.ts), not bytes.
 * Runs after validation, so an invalid request stores nothing.
 * Operations opt in with `x-idempotent: true` in the spec (spec-router.ts mounts this layer).
 *
 * "Still running" is a lease, as a generation's run is: the request that claims a key renews its
 * claim every third of `leaseMs` (one statement for every claim the process holds) until its answer
 * is stored or removed. A claim nobody renews (its process died, or the removal after a database
 * outage never reached the database) lapses, and a retry of the same request takes it over.
 */
export function idempotency(deps: { db: Kysely<Database>; clock: Clock; logger: Logger; adminSecret: string; idempotencyLeaseMs?: number }): RequestHandler {
  const leaseMs = deps.idempotencyLeaseMs ?? DEFAULT_LEASE_MS;
  // Each claim's owner is this process plus a counter: renewals name the running requests' claims only.
  const processOwner = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  let claims = 0;
  const held = new RenewedSet<string, true>(
    Math.floor(leaseMs / 3),
    (batch) =>
      renewIdempotencyClaims(
        deps.db,
        batch.map(([owner]) => owner),
        deps.clock.now() + leaseMs,
      ),
    (error, entries) => deps.logger.warn({ err: error, claims: entries }, 'could not renew idempotency claims'),
  );

  return async (req, res, next) => {
    const key = req.get('idempotency-key');
    if (key === undefined) {
      next();
      return;
    }
    const scope = scopeOf(res);
    const now = deps.clock.now();
    const requestHash = requestFingerprint(req.method, req.path, req.body, req.get('prefer'));
    claims += 1;
    const owner = `${processOwner}:${claims.toString(36)}`;
    const claim: IdempotencyClaim = {
      scope,
      idempotency_key: key,
      request_hash: requestHash,
      created_at: now,
      lease_owner: owner,
      lease_expires_at: now + leaseMs,
    };

    let claimed = await claimIdempotencyKey(deps.db, claim);
    if (!claimed) {
      const existing = await findIdempotencyRecord(deps.db, scope, key);
      if (existing && existing.created_at < now - IDEMPOTENCY_TTL_MS) {
        // Expired: the key may be used afresh.
        await deleteIdempotencyRecord(deps.db, scope, key);
        claimed = await claimIdempotencyKey(deps.db, claim);
      } else if (existing?.state === 'running' && existing.request_hash === requestHash && Number(existing.lease_expires_at) <= now) {
        // Nothing renews the first request's claim: nothing runs it any more.
        claimed = await takeOverIdempotencyClaim(deps.db, claim);
      }
      if (!claimed) {
        const record = existing ?? (await findIdempotencyRecord(deps.db, scope, key));
        if (!record) throw new ApiError('idempotency_key_in_use', 'This Idempotency-Key is being processed; retry shortly.');
        if (record.request_hash !== requestHash) {
          throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was used with a different request; use a new key.', {
            param: 'Idempotency-Key',
          });
        }
        if (record.state !== 'done') {
          throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry shortly.');
        }
        res.setHeader('Idempotent-Replayed', 'true');
        if (record.response_location) res.setHeader('Location', record.response_location);
        res
          .status(record.response_status as number)
          .type('application/json')
          .send(openResponse(record.response_body as string, deps.adminSecret, scope, key));
        return;
      }
    }
    held.add(owner, true);

    const send = res.json.bind(res);
    let stored = false;
    res.json = ((body: unknown) => {
      if (stored) return send(body);
      stored = true;
      const status = res.statusCode;
      const text = sealResponse(JSON.stringify(body), deps.adminSecret, scope, key);
      const location = res.getHeader('location');
      const persist = (
        keepable(status)
          ? completeIdempotencyRecord(deps.db, scope, key, owner, { status, body: text, location: typeof location === 'string' ? location : null }).then(
              (completed) => {
                if (!completed) deps.logger.warn({ request_id: res.locals.requestId }, 'the idempotency claim was taken over before the response was stored');
              },
            )
          : deleteIdempotencyRecord(deps.db, scope, key, owner)
      ).finally(() => held.delete(owner));
      // A database outage has already cost this request its wait: the 503 does not wait for the
      // record's removal too. If the removal fails, the claim is no longer renewed and a retry takes
      // it over once its lease lapses.
      if (status === 503) {
        persist.catch((error: unknown) => deps.logger.error({ err: error, request_id: res.locals.requestId }, 'could not remove the idempotency record'));
        return send(body);
      }
      persist.then(
        () => send(body),
        (error: unknown) => {
          deps.logger.error({ err: error, request_id: res.locals.requestId }, 'could not store the idempotent response');
          send(body);
        },
      );
      return res;
    }) as typeof res.json;
    next();
  };
}
