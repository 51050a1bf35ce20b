import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import { olderThan } from '../db/keyset';
import type { AuditEventsTable, Database } from '../db/schema';
import { toIso } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { parseTimestamp } from '../shared/rfc3339';

type Schemas = components['schemas'];
export type AuditEventResource = Schemas['AuditEvent'];

export interface AuditEventQuery {
  actor?: string;
  target?: string;
  action?: string;
  created_after?: string;
  created_before?: string;
  limit?: number;
  cursor?: string;
}

function toResource(row: AuditEventsTable): AuditEventResource {
  return {
    id: row.id,
    created_at: toIso(row.created_at),
    actor: row.actor,
    action: row.action,
    target: row.target,
    before: row.before === null ? null : (JSON.parse(row.before) as Record<string, unknown>),
    after: row.after === null ? null : (JSON.parse(row.after) as Record<string, unknown>),
    request_id: row.request_id,
    client_ip: row.client_ip,
  };
}

/** The audit log's read side (GET /admin/audit-events). There is deliberately no way to change events. */
export class AuditService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly cursors: CursorCodec,
  ) {}

  async listEvents(query: AuditEventQuery): Promise<Schemas['AuditEventList']> {
    const limit = query.limit ?? 50;
    let q = this.db.selectFrom('audit_events').selectAll();
    if (query.actor !== undefined) q = q.where('actor', '=', query.actor);
    if (query.target !== undefined) q = q.where('target', '=', query.target);
    if (query.action !== undefined) q = q.where('action', '=', query.action);
    if (query.created_after !== undefined) q = q.where('created_at', '>=', parseTimestamp(query.created_after, 'created_after'));
    if (query.created_before !== undefined) q = q.where('created_at', '<', parseTimestamp(query.created_before, 'created_before'));
    if (query.cursor !== undefined) q = q.where(olderThan(this.cursors.position(query.cursor, 'aud')));
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1)
      .execute();
    const { page, nextCursor } = this.cursors.pageOf(rows, limit, 'aud');
    return { data: page.map(toResource), next_cursor: nextCursor };
  }
}
