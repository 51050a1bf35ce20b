import type { Insertable, Kysely } from 'kysely';
import type { Database, WebhookDeliveriesTable } from '../db/schema';
import { toIso } from '../shared/clock';
import { randomBase62 } from '../shared/ids';

/**
 * The event outbox, for every feature that announces something (keys, channels, async generations):
 * below them all, and below webhooks, which deliver it. `emitEvent` runs inside the caller's
 * transaction, so the event exists if and only if the change that caused it committed; it also
 * queues one delivery per enabled endpoint subscribed to the type, which the dispatcher
 * (src/webhooks/dispatcher.ts) sends at least once.
 */
export type Db = Kysely<Database>;

/** A delivery row not yet attempted, due at once: the dispatcher's unit of work. */
export function pendingDelivery(eventId: string, endpointId: string, now: number): Insertable<WebhookDeliveriesTable> {
  return {
    id: `whd_${randomBase62(22)}`,
    event_id: eventId,
    endpoint_id: endpointId,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    lease_expires_at: null,
    last_status_code: null,
    last_error: null,
    created_at: now,
    completed_at: null,
  };
}

export const EVENT_TYPES = [
  'key.quota.threshold_reached',
  'key.quota.exhausted',
  'project.quota.threshold_reached',
  'project.quota.exhausted',
  'key.expiring',
  'key.expired',
  'key.disabled',
  'channel.auto_disabled',
  'webhook.test',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface NewEvent {
  type: EventType;
  data: Record<string, unknown>;
  /** Set for events that must exist once: a second emit with the same key does nothing. */
  dedupeKey?: string;
  /** Deliver to this endpoint only (the test event), whatever it subscribes to. */
  endpointId?: string;
}

/** Standard Webhooks' recommended body. */
export function eventBody(type: string, createdAt: number, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp: toIso(createdAt), data });
}

/** Writes the event and its deliveries in `trx`; returns the event id, or undefined when the dedupe key already exists. */
export async function emitEvent(trx: Db, event: NewEvent, now: number): Promise<string | undefined> {
  const id = `msg_${randomBase62(24)}`;
  const inserted = await trx
    .insertInto('events')
    .values({ id, type: event.type, payload: eventBody(event.type, now, event.data), dedupe_key: event.dedupeKey ?? null, created_at: now })
    .onConflict((oc) => oc.column('dedupe_key').doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!inserted) return undefined;
  let endpoints = trx.selectFrom('webhook_endpoints').select(['id', 'event_types']).where('status', '=', 'enabled');
  if (event.endpointId !== undefined) endpoints = endpoints.where('id', '=', event.endpointId);
  const targets = (await endpoints.execute()).filter(
    (endpoint) => event.endpointId !== undefined || (JSON.parse(endpoint.event_types) as string[]).includes(event.type),
  );
  if (targets.length > 0) {
    await trx
      .insertInto('webhook_deliveries')
      .values(targets.map((endpoint) => pendingDelivery(id, endpoint.id, now)))
      .execute();
  }
  return id;
}
