import type { components } from '../../generated/gateway';
import { type AuditContext, REDACTED, updateChange, withAuditEvent } from '../audit/audit-log';
import { olderThan } from '../db/keyset';
import { forUpdate } from '../db/row-lock';
import type { WebhookEndpointsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { type Clock, toIso, toIsoOrNull } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { randomBase62 } from '../shared/ids';
import { type Db, emitEvent } from '../events/outbox';
import { urlProblem } from '../shared/safe-url';
import type { WebhookSecrets } from './secret-sealing';
import { generateWebhookSecret } from './signing';

type Schemas = components['schemas'];
export type WebhookEndpointResource = Schemas['WebhookEndpoint'];
export type WebhookEndpointWithSecret = Schemas['WebhookEndpointWithSecret'];
type EventType = Schemas['EventType'];

function toResource(row: WebhookEndpointsTable, now: number): WebhookEndpointResource {
  const overlapEnds = row.previous_secret_expires_at !== null && row.previous_secret_expires_at > now ? row.previous_secret_expires_at : null;
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: JSON.parse(row.event_types) as EventType[],
    status: row.status as WebhookEndpointResource['status'],
    disabled_reason: row.disabled_reason,
    disabled_at: toIsoOrNull(row.disabled_at),
    failing_since: toIsoOrNull(row.failing_since),
    previous_secret_expires_at: toIsoOrNull(overlapEnds),
    created_at: toIso(row.created_at),
    updated_at: toIso(row.updated_at),
  };
}

const withoutUpdatedAt = ({ updated_at: _, ...rest }: WebhookEndpointResource): Record<string, unknown> => rest;

/** The /admin/webhooks operations; every change is recorded in the audit log, in its transaction. */
export class WebhooksService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly allowPrivateNetworks: boolean,
    /** Seals the signing secrets stored (they are shown once, in clear, in the response only). */
    private readonly secrets: WebhookSecrets,
    private readonly cursors: CursorCodec,
    /** Wakes the local dispatcher after an event is queued. */
    private readonly onQueued: () => void = () => undefined,
  ) {}

  private checkUrl(url: string): void {
    const problem = urlProblem(url, this.allowPrivateNetworks);
    if (problem) throw new ApiError('invalid_request', `url ${problem}.`, { param: 'url' });
  }

  private async requireEndpoint(id: string, db: Db = this.db, options: { lock?: boolean } = {}): Promise<WebhookEndpointsTable> {
    const query = db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id);
    const row = await (options.lock ? forUpdate(db, query) : query).executeTakeFirst();
    if (!row) throw new ApiError('webhook_endpoint_not_found', `No webhook endpoint with id ${id}.`, { param: 'id' });
    return row;
  }

  async create(input: Schemas['CreateWebhookEndpointRequest'], audit: AuditContext): Promise<WebhookEndpointWithSecret> {
    this.checkUrl(input.url);
    const now = this.clock.now();
    const id = `whep_${randomBase62(22)}`;
    const secret = generateWebhookSecret();
    const row: WebhookEndpointsTable = {
      id,
      url: input.url,
      description: input.description ?? '',
      event_types: JSON.stringify(input.event_types),
      status: 'enabled',
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
      secret: this.secrets.seal(id, secret),
      previous_secret: null,
      previous_secret_expires_at: null,
      created_at: now,
      updated_at: now,
    };
    return withAuditEvent(this.db, audit, now, async (trx) => {
      await trx.insertInto('webhook_endpoints').values(row).execute();
      const created = toResource(row, now);
      // The secret never reaches the audit log, not even to be redacted there.
      return {
        result: { ...created, secret },
        change: { action: 'webhook_endpoint.created', target: row.id, before: null, after: { ...created, secret: REDACTED } },
      };
    });
  }

  async list(): Promise<{ data: WebhookEndpointResource[] }> {
    const now = this.clock.now();
    const rows = await this.db.selectFrom('webhook_endpoints').selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    return { data: rows.map((row) => toResource(row, now)) };
  }

  async get(id: string): Promise<WebhookEndpointResource> {
    return toResource(await this.requireEndpoint(id), this.clock.now());
  }

  async update(id: string, input: Schemas['UpdateWebhookEndpointRequest'], audit: AuditContext): Promise<WebhookEndpointResource> {
    if (input.url !== undefined) this.checkUrl(input.url);
    const now = this.clock.now();
    return withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await this.requireEndpoint(id, trx, { lock: true });
      const changes: Partial<WebhookEndpointsTable> = {};
      if (input.url !== undefined) changes.url = input.url;
      if (input.event_types !== undefined) changes.event_types = JSON.stringify(input.event_types);
      if (input.description !== undefined) changes.description = input.description;
      if (input.status === 'enabled' && current.status !== 'enabled')
        Object.assign(changes, { status: 'enabled', disabled_reason: null, disabled_at: null, failing_since: null });
      if (input.status === 'disabled' && current.status !== 'disabled')
        Object.assign(changes, { status: 'disabled', disabled_reason: 'Disabled by an administrator.', disabled_at: now });
      const before = toResource(current, now);
      const change = updateChange('webhook_endpoint.updated', id, withoutUpdatedAt(before), withoutUpdatedAt(toResource({ ...current, ...changes }, now)));
      // A request that changes nothing writes (and records) nothing.
      if (change === null) return { result: before, change: null };
      const row = await trx
        .updateTable('webhook_endpoints')
        .set({ ...changes, updated_at: now })
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return { result: toResource(row, now), change };
    });
  }

  async delete(id: string, audit: AuditContext): Promise<void> {
    const now = this.clock.now();
    await withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await this.requireEndpoint(id, trx, { lock: true });
      const deliveries = trx.selectFrom('webhook_deliveries').select('id').where('endpoint_id', '=', id);
      await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', deliveries).execute();
      await trx.deleteFrom('webhook_deliveries').where('endpoint_id', '=', id).execute();
      await trx.deleteFrom('webhook_endpoints').where('id', '=', id).execute();
      return { result: undefined, change: { action: 'webhook_endpoint.deleted', target: id, before: toResource(current, now), after: null } };
    });
  }

  async rotateSecret(id: string, overlapSeconds: number, audit: AuditContext): Promise<WebhookEndpointWithSecret> {
    const now = this.clock.now();
    const secret = generateWebhookSecret();
    return withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await this.requireEndpoint(id, trx, { lock: true });
      const row = await trx
        .updateTable('webhook_endpoints')
        // The old secret stays sealed as it is (sealed now if it was stored before sealing).
        .set({
          secret: this.secrets.seal(id, secret),
          previous_secret: this.secrets.resealed(id, current.secret) ?? current.secret,
          previous_secret_expires_at: now + overlapSeconds * 1000,
          updated_at: now,
        })
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      const rotated = toResource(row, now);
      return {
        result: { ...rotated, secret },
        // That the secret changed, never its value (old or new).
        change: {
          action: 'webhook_endpoint.secret_rotated',
          target: id,
          // Named apart from the secret: the audit log redacts every field named like one.
          before: { overlap_ends_at: toResource(current, now).previous_secret_expires_at },
          after: { overlap_ends_at: rotated.previous_secret_expires_at, secret: REDACTED },
        },
      };
    });
  }

  async sendTest(id: string, audit: AuditContext): Promise<{ event_id: string }> {
    const now = this.clock.now();
    const eventId = await withAuditEvent(this.db, audit, now, async (trx) => {
      await this.requireEndpoint(id, trx);
      const queued = (await emitEvent(
        trx,
        { type: 'webhook.test', data: { endpoint_id: id, message: 'A test event from the Creative Gateway.' }, endpointId: id },
        now,
      )) as string;
      return { result: queued, change: { action: 'webhook_endpoint.test_sent', target: id, before: null, after: { event_id: queued } } };
    });
    this.onQueued();
    return { event_id: eventId };
  }

  async listDeliveries(
    id: string,
    query: { status?: 'pending' | 'succeeded' | 'failed'; limit?: number; cursor?: string },
  ): Promise<Schemas['WebhookDeliveryList']> {
    const limit = query.limit ?? 50;
    const after = query.cursor === undefined ? undefined : this.cursors.position(query.cursor, 'whd');
    await this.requireEndpoint(id);
    let q = this.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .selectAll('d')
      .select('e.type as event_type')
      .where('d.endpoint_id', '=', id);
    if (query.status !== undefined) q = q.where('d.status', '=', query.status);
    if (after) q = q.where(olderThan(after, 'd'));
    const { page: rows, nextCursor } = this.cursors.pageOf(
      await q
        .orderBy('d.created_at', 'desc')
        .orderBy('d.id', 'desc')
        .limit(limit + 1)
        .execute(),
      limit,
      'whd',
    );
    const attempts =
      rows.length === 0
        ? []
        : await this.db
            .selectFrom('webhook_attempts')
            .selectAll()
            .where(
              'delivery_id',
              'in',
              rows.map((r) => r.id),
            )
            .orderBy('attempt')
            .execute();
    return {
      next_cursor: nextCursor,
      data: rows.map((row) => ({
        id: row.id,
        event_id: row.event_id,
        event_type: row.event_type,
        status: row.status as 'pending' | 'succeeded' | 'failed',
        attempts: row.attempts,
        next_attempt_at: toIso(row.next_attempt_at),
        last_status_code: row.last_status_code,
        last_error: row.last_error,
        created_at: toIso(row.created_at),
        completed_at: toIsoOrNull(row.completed_at),
        attempt_log: attempts
          .filter((a) => a.delivery_id === row.id)
          .map((a) => ({ attempt: a.attempt, attempted_at: toIso(a.attempted_at), status_code: a.status_code, error: a.error, duration_ms: a.duration_ms })),
      })),
    };
  }
}
