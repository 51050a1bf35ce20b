import type { Kysely } from 'kysely';
import type { AdminPrincipal, ServicePrincipal } from '../auth/principal';
import type { Database } from '../db/schema';
import { newSortableId } from '../shared/ids';

/**
 * The audit log's write side, for every service that changes admin state (keys, tokens, channels,
 * webhooks, ...): call `recordAuditEvent` with the transaction that makes the change, so the event
 * exists exactly when the change does.
 */

/** Who asked, from the operation's request: handlers build it with `auditContextOf`. */
export interface AuditContext {
  /** `root` (the admin secret), an admin token id, `access:<email>` (an Access JWT), or a service's client id. */
  actor: string;
  requestId: string;
  clientIp: string;
}

export interface AuditChange {
  /** `<resource>.<verb>`, e.g. `key.updated` (see the AuditAction schema). */
  action: string;
  /** The id of what changed. */
  target: string;
  /** The changed fields before (null for a creation) and after (null for a deletion). */
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

export function auditContextOf(request: { principal: AdminPrincipal | ServicePrincipal; requestId: string; clientIp: string }): AuditContext {
  const { principal } = request;
  return { actor: principal.kind === 'admin' ? principal.actor : principal.clientId, requestId: request.requestId, clientIp: request.clientIp };
}

/** Field names whose values never reach the log, at any depth. */
const SECRET_FIELD = /(^key$|secret|password|token$|_hash$|^authorization$)/i;
export const REDACTED = '[redacted]';

export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([name, v]) => [name, SECRET_FIELD.test(name) && v !== null ? REDACTED : redactSecrets(v)]));
}

/** Only the fields that differ, from both sides (a field absent on one side counts as null there). */
export function changedFields(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): { before: Record<string, unknown>; after: Record<string, unknown> } {
  const changed = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter(
    (name) => JSON.stringify(before[name] ?? null) !== JSON.stringify(after[name] ?? null),
  );
  return {
    before: Object.fromEntries(changed.map((name) => [name, before[name] ?? null])),
    after: Object.fromEntries(changed.map((name) => [name, after[name] ?? null])),
  };
}

const serialize = (side: Record<string, unknown> | null): string | null => (side === null ? null : JSON.stringify(redactSecrets(side)));

/** Appends one event; `trx` must be the transaction that makes the change. */
export async function recordAuditEvent(trx: Kysely<Database>, context: AuditContext, change: AuditChange, at: number): Promise<void> {
  await trx
    .insertInto('audit_events')
    .values({
      id: newSortableId('aud', at),
      created_at: at,
      actor: context.actor,
      action: change.action,
      target: change.target,
      before: serialize(change.before),
      after: serialize(change.after),
      request_id: context.requestId,
      client_ip: context.clientIp,
    })
    .execute();
}

/**
 * Runs `work` in a transaction and records the change it reports in the same transaction (nothing
 * when it reports none: a request that changed nothing leaves no event).
 */
export async function withAuditEvent<T>(
  db: Kysely<Database>,
  context: AuditContext,
  at: number,
  work: (trx: Kysely<Database>) => Promise<{ result: T; change: AuditChange | null }>,
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    const { result, change } = await work(trx);
    if (change) await recordAuditEvent(trx, context, change, at);
    return result;
  });
}

/** An update's change: only the fields that differ, or null when none does. */
export function updateChange(action: string, target: string, before: Record<string, unknown>, after: Record<string, unknown>): AuditChange | null {
  const changed = changedFields(before, after);
  return Object.keys(changed.after).length === 0 ? null : { action, target, ...changed };
}
