import { type ExpressionBuilder, sql } from 'kysely';
import type { Logger } from 'pino';
import type { Database, WebhookDeliveriesTable } from '../db/schema';
import { capabilitiesOf } from '../db/storage-capabilities';
import type { Clock } from '../shared/clock';
import type { Db } from '../events/outbox';
import { emitExpiryEvents } from '../events/key-events';
import { type PostResult, postJson } from '../shared/outbound';
import type { WebhookSecrets } from './secret-sealing';
import { signedHeaders } from './signing';
import { injectTraceContext, tracingEnabled, withSpan } from '../telemetry/tracing';

/**
 * Sends queued deliveries, in every gateway process. A delivery is claimed with a lease (`FOR UPDATE
 * SKIP LOCKED` where the engine has it, PostgreSQL; else a conditional UPDATE), so one replica sends
 * it at a time; a replica that dies mid-delivery leaves a lease that lapses, and another replica (or
 * the restarted one) sends it again with the same `webhook-id`: at least once.
 */

/** Standard Webhooks' suggested schedule: the delay before attempt n+1 (then give up). */
export const RETRY_SCHEDULE_MS = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000];

/** The delay before the next attempt after `attempts` failed ones, with +-20 % jitter; undefined when they are used up. */
export function retryDelayMs(attempts: number, random: () => number = Math.random): number | undefined {
  const base = RETRY_SCHEDULE_MS[attempts];
  if (base === undefined) return undefined;
  return Math.round(base * (0.8 + 0.4 * random()));
}

export interface DispatcherOptions {
  db: Db;
  clock: Clock;
  logger: Logger;
  /** How often each process looks for due deliveries. */
  pollIntervalMs: number;
  /** How long a claim holds a delivery (beyond the send timeout, or a crash causes an early resend). */
  leaseMs: number;
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  /** An endpoint failing for this long (every attempt since) is disabled. */
  disableAfterMs: number;
  /** Opens the endpoints' sealed signing secrets. */
  secrets: WebhookSecrets;
  /** `key.expiring` this many days ahead. */
  keyExpiringDays: number;
  /** How often the key-expiry scan runs. */
  expiryScanIntervalMs: number;
}

interface Claimed extends WebhookDeliveriesTable {
  url: string | null;
  secret: string | null;
  /** Completion webhooks (target_url set): the signing key's sealed secret. */
  key_secret: string | null;
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  endpoint_status: string | null;
  failing_since: number | null;
  payload: string;
}

export class WebhookDispatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private lastExpiryScan = 0;
  private stopped = false;

  constructor(private readonly options: DispatcherOptions) {}

  start(): void {
    this.timer = setInterval(() => this.poke(), this.options.pollIntervalMs);
    this.timer.unref();
    this.poke();
  }

  /** Runs a pass now unless one is running (called after an event is emitted, too). */
  poke(): void {
    if (this.stopped || this.running) return;
    this.running = this.pass()
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'webhook dispatch pass failed'))
      .finally(() => {
        this.running = undefined;
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  private async pass(): Promise<void> {
    const now = this.options.clock.now();
    if (now - this.lastExpiryScan >= this.options.expiryScanIntervalMs) {
      this.lastExpiryScan = now;
      await emitExpiryEvents(this.options.db, this.options.keyExpiringDays, now);
    }
    for (;;) {
      const claimed = await this.claim(10);
      if (claimed.length === 0) return;
      await Promise.all(claimed.map((delivery) => this.deliver(delivery)));
      if (this.stopped) return;
    }
  }

  private async claim(limit: number): Promise<Claimed[]> {
    const { db, clock, leaseMs } = this.options;
    const now = clock.now();
    const due = (eb: ExpressionBuilder<Database, 'webhook_deliveries'>) =>
      eb.and([eb('status', '=', 'pending'), eb('next_attempt_at', '<=', now), eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<=', now)])]);
    let ids: string[];
    if (capabilitiesOf(db).skipLocked) {
      const rows = await sql<{ id: string }>`
        UPDATE webhook_deliveries SET lease_expires_at = ${now + leaseMs}
        WHERE id IN (${db.selectFrom('webhook_deliveries').select('id').where(due).orderBy('next_attempt_at').limit(limit).forUpdate().skipLocked()})
        RETURNING id`.execute(db);
      ids = rows.rows.map((r) => r.id);
    } else {
      const candidates = await db
        .selectFrom('webhook_deliveries')
        .select(['id', 'lease_expires_at'])
        .where(due)
        .orderBy('next_attempt_at')
        .limit(limit)
        .execute();
      ids = [];
      for (const candidate of candidates) {
        // Claimed only if nobody claimed it since we looked: the same lease value still there.
        let update = db
          .updateTable('webhook_deliveries')
          .set({ lease_expires_at: now + leaseMs })
          .where('id', '=', candidate.id)
          .where('status', '=', 'pending');
        update =
          candidate.lease_expires_at === null
            ? update.where('lease_expires_at', 'is', null)
            : update.where('lease_expires_at', '=', candidate.lease_expires_at);
        const result = await update.executeTakeFirst();
        if (Number(result.numUpdatedRows) === 1) ids.push(candidate.id);
      }
    }
    if (ids.length === 0) return [];
    return db
      .selectFrom('webhook_deliveries as d')
      .leftJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .leftJoin('key_webhook_secrets as k', 'k.key_id', 'd.signing_key_id')
      .innerJoin('events as ev', 'ev.id', 'd.event_id')
      .selectAll('d')
      .select(['e.url', 'e.secret', 'e.previous_secret', 'e.previous_secret_expires_at', 'e.status as endpoint_status', 'e.failing_since', 'ev.payload'])
      .select('k.secret as key_secret')
      .where('d.id', 'in', ids)
      .execute();
  }

  /** The secrets to sign with (the previous one too during a rotation's overlap); undefined when they cannot be opened. */
  private openSecrets(delivery: Claimed, now: number): string[] | undefined {
    const { secrets, logger } = this.options;
    try {
      if (delivery.target_url) {
        if (!delivery.signing_key_id || !delivery.key_secret) throw new Error('the key has no webhook secret');
        return [secrets.openForKey(delivery.signing_key_id, delivery.key_secret)];
      }
      if (delivery.secret === null) throw new Error('the endpoint is gone');
      const opened = [secrets.open(delivery.endpoint_id, delivery.secret)];
      if (delivery.previous_secret && (delivery.previous_secret_expires_at ?? 0) > now)
        opened.push(secrets.open(delivery.endpoint_id, delivery.previous_secret));
      return opened;
    } catch (error) {
      logger.error({ endpoint_id: delivery.endpoint_id, reason: (error as Error).message }, 'cannot open a webhook signing secret');
      return undefined;
    }
  }

  private async deliver(delivery: Claimed): Promise<void> {
    const { db, clock, timeoutMs, allowPrivateNetworks, logger } = this.options;
    // A completion webhook goes to its request's own URL; endpoints' status and failure tracking do not apply.
    const target = delivery.target_url ?? delivery.url;
    if (!delivery.target_url && delivery.endpoint_status !== 'enabled') {
      await db
        .updateTable('webhook_deliveries')
        .set({ status: 'failed', last_error: 'endpoint disabled', completed_at: clock.now(), lease_expires_at: null })
        .where('id', '=', delivery.id)
        .execute();
      return;
    }
    const started = clock.now();
    const secrets = this.openSecrets(delivery, started);
    // Receivers check webhook-timestamp against their own clock: it is the wall-clock time, whatever clock schedules us.
    const result: PostResult =
      secrets === undefined || target === null
        ? { error: 'its signing secret cannot be opened (sealing key not configured)' }
        : await traceDelivery(delivery.endpoint_id, () =>
            postJson(target, withTraceContext(signedHeaders(secrets, delivery.event_id, Math.floor(Date.now() / 1000), delivery.payload)), delivery.payload, {
              timeoutMs,
              allowPrivate: allowPrivateNetworks,
            }),
          );
    const finished = clock.now();
    const attempt = delivery.attempts + 1;
    const ok = result.statusCode !== undefined && result.statusCode >= 200 && result.statusCode < 300;
    const error = ok ? null : (result.error ?? `HTTP ${result.statusCode}`);
    const nextDelay = ok ? undefined : retryDelayMs(attempt);
    await db.transaction().execute(async (trx) => {
      await trx
        .insertInto('webhook_attempts')
        .values({ delivery_id: delivery.id, attempt, attempted_at: started, status_code: result.statusCode ?? null, error, duration_ms: finished - started })
        .onConflict((oc) => oc.columns(['delivery_id', 'attempt']).doNothing())
        .execute();
      await trx
        .updateTable('webhook_deliveries')
        .set({
          attempts: attempt,
          last_status_code: result.statusCode ?? null,
          last_error: error,
          lease_expires_at: null,
          ...(ok
            ? { status: 'succeeded', completed_at: finished }
            : nextDelay === undefined || result.statusCode === 410
              ? { status: 'failed', completed_at: finished }
              : { next_attempt_at: finished + nextDelay }),
        })
        .where('id', '=', delivery.id)
        .execute();
      const endpoint = trx.updateTable('webhook_endpoints').where('id', '=', delivery.endpoint_id);
      if (delivery.target_url) {
        // No endpoint to mark.
      } else if (ok) {
        await endpoint.set({ failing_since: null }).where('failing_since', 'is not', null).execute();
      } else if (result.statusCode === 410) {
        await endpoint
          .set({ status: 'disabled', disabled_at: finished, disabled_reason: 'The endpoint answered 410 Gone.', updated_at: finished })
          .where('status', '=', 'enabled')
          .execute();
      } else {
        const failingSince = delivery.failing_since ?? started;
        if (finished - failingSince >= this.options.disableAfterMs) {
          await endpoint
            .set({
              status: 'disabled',
              disabled_at: finished,
              disabled_reason: `Every delivery failed since ${new Date(failingSince).toISOString()} (last: ${error}).`,
              updated_at: finished,
            })
            .where('status', '=', 'enabled')
            .execute();
        } else if (delivery.failing_since === null) {
          await endpoint.set({ failing_since: started }).where('failing_since', 'is', null).execute();
        }
      }
    });
    logger.info(
      { delivery_id: delivery.id, event_id: delivery.event_id, endpoint_id: delivery.endpoint_id, attempt, status_code: result.statusCode, ok },
      'webhook delivery attempt',
    );
  }
}

/** A delivery as a client span (its status, or its failure), when traces are on. */
function traceDelivery(endpointId: string | null, post: () => Promise<PostResult>): Promise<PostResult> {
  if (!tracingEnabled()) return post();
  return withSpan(
    'webhook delivery',
    endpointId === null ? {} : { 'gateway.webhook.endpoint_id': endpointId },
    async (span) => {
      const result = await post();
      if (result.statusCode !== undefined) span.set({ 'http.response.status_code': result.statusCode });
      if (result.statusCode === undefined || result.statusCode >= 300)
        span.fail(result.statusCode === undefined ? 'delivery_error' : String(result.statusCode));
      return result;
    },
    { kind: 'client' },
  );
}

function withTraceContext(headers: Record<string, string>): Record<string, string> {
  injectTraceContext(headers);
  return headers;
}
