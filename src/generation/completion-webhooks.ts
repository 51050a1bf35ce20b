import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import type { Database, GenerationsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import type { Clock } from '../shared/clock';
import { toIso } from '../shared/clock';
import { randomBase62 } from '../shared/ids';
import { eventBody, pendingDelivery } from '../events/outbox';
import { urlProblem } from '../shared/safe-url';
import type { WebhookSecrets } from '../webhooks/secret-sealing';
import { generateWebhookSecret } from '../webhooks/signing';

type Db = Kysely<Database>;
/** The generation as GET /generations/{id} shows it (client-generations.ts builds it). */
type ClientGeneration = components['schemas']['ClientGeneration'];

export const COMPLETION_EVENTS = ['completed', 'failed', 'canceled'] as const;
export type CompletionEvent = (typeof COMPLETION_EVENTS)[number];

/** Stored with the generation's request (generations.request): where and what to deliver. */
export interface GenerationWebhook {
  url: string;
  events: CompletionEvent[];
}

/** The dedupe key of a generation's completion event: one per generation, found again by the prompt-retention sweep. */
export function completionEventKey(generationId: string): string {
  return `generation:${generationId}`;
}

const EVENT_OF_STATUS: Record<string, CompletionEvent | undefined> = { succeeded: 'completed', failed: 'failed', canceled: 'canceled' };

export interface CompletionWebhooksDeps {
  /** Where the keys' signing secrets are kept. */
  db: Kysely<Database>;
  clock: Clock;
  secrets: WebhookSecrets;
  allowPrivateNetworks: boolean;
  /** The generation as GET /generations/{id} shows it, read in `db` (the settling transaction). */
  resource: (db: Db, row: GenerationsTable) => Promise<ClientGeneration>;
  /** Wakes the dispatcher once a delivery is committed. */
  poke: () => void;
}

/**
 * Completion webhooks (Replicate's `webhook` + `webhook_events_filter`): at settlement, in the
 * transaction that settles the generation, an outbox event and one delivery to the request's URL,
 * signed with the key's own secret; the webhook dispatcher sends it with its retries and address checks.
 */
export class CompletionWebhooks {
  constructor(private readonly deps: CompletionWebhooksDeps) {}

  /** The request's webhook, checked (400 `webhook` when the URL may not receive deliveries). */
  validate(input: { webhook?: string; webhook_events_filter?: CompletionEvent[] }): GenerationWebhook | undefined {
    if (input.webhook === undefined) {
      if (input.webhook_events_filter !== undefined)
        throw new ApiError('invalid_request', 'webhook_events_filter needs a webhook.', { param: 'webhook_events_filter' });
      return undefined;
    }
    const problem = urlProblem(input.webhook, this.deps.allowPrivateNetworks);
    if (problem !== undefined) throw new ApiError('invalid_request', `webhook: ${problem}`, { param: 'webhook' });
    return { url: input.webhook, events: input.webhook_events_filter ?? [...COMPLETION_EVENTS] };
  }

  /** The key's signing secret, created (sealed) on first use; concurrent first uses agree on one. */
  async secretFor(keyId: string): Promise<{ secret: string; createdAt: number }> {
    const { db } = this.deps;
    let row = await db.selectFrom('key_webhook_secrets').selectAll().where('key_id', '=', keyId).executeTakeFirst();
    if (!row) {
      const now = this.deps.clock.now();
      await db
        .insertInto('key_webhook_secrets')
        .values({ key_id: keyId, secret: this.deps.secrets.sealForKey(keyId, generateWebhookSecret()), created_at: now })
        .onConflict((oc) => oc.column('key_id').doNothing())
        .execute();
      row = await db.selectFrom('key_webhook_secrets').selectAll().where('key_id', '=', keyId).executeTakeFirstOrThrow();
    }
    return { secret: this.deps.secrets.openForKey(keyId, row.secret), createdAt: Number(row.created_at) };
  }

  /**
   * Queues the delivery for a generation `trx` just settled, when it asked for this outcome; true
   * when one was queued (call `poke` after the commit). Reads the row back in `trx` for its final state.
   */
  async emit(trx: Db, generationId: string): Promise<boolean> {
    const row = await trx.selectFrom('generations').selectAll().where('id', '=', generationId).executeTakeFirst();
    if (!row || row.key_id === null || row.request === null) return false;
    // generations.request is a StoredGenerationRequest (durable.ts): only its webhook is read here.
    const webhook = (JSON.parse(row.request) as { webhook?: GenerationWebhook }).webhook;
    const event = EVENT_OF_STATUS[row.status];
    if (!webhook || !event || !webhook.events.includes(event)) return false;
    const now = this.deps.clock.now();
    const type = `generation.${event}`;
    const data = await this.deps.resource(trx, { ...row, created_at: Number(row.created_at) });
    const eventId = `msg_${randomBase62(24)}`;
    await trx
      .insertInto('events')
      .values({
        id: eventId,
        type,
        payload: eventBody(type, now, data as unknown as Record<string, unknown>),
        dedupe_key: completionEventKey(row.id),
        created_at: now,
      })
      .execute();
    await trx
      .insertInto('webhook_deliveries')
      .values({
        // Not an endpoint: names the key whose secret signs it (the unique (event, endpoint) pair holds).
        ...pendingDelivery(eventId, row.key_id, now),
        target_url: webhook.url,
        signing_key_id: row.key_id,
      })
      .execute();
    return true;
  }

  poke(): void {
    this.deps.poke();
  }
}

export function secretResource(secret: { secret: string; createdAt: number }): { object: 'webhook_secret'; secret: string; created_at: string } {
  return { object: 'webhook_secret', secret: secret.secret, created_at: toIso(secret.createdAt) };
}
