import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import { type AuditContext, auditContextOf, recordAuditEvent } from '../audit/audit-log';
import type { Database, GenerationsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { generationModerationDetailOf } from '../guardrails/project-moderation';
import type { GatewayHandlers } from '../http/handler-maps';
import type { Clock } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import type { ClientGenerations } from './client-generations';
import type { GenerationResources } from './generation-resource';
import { generationPage, type GenerationListQuery } from './generation-list';
import { findGeneration } from './generations.repository';

type Schemas = components['schemas'];
type AdminGeneration = Schemas['AdminGeneration'];

export type AdminGenerationQuery = Omit<GenerationListQuery, 'client_id'>;

/**
 * Every key's generations, for administrators (/admin/generations): the key holder's resource
 * (generation-resource.ts) with its key, and the key holder's cancel path (ClientGenerations.cancelRow)
 * with an audit event in its transaction.
 */
export class AdminGenerations {
  constructor(
    private readonly deps: { db: Kysely<Database>; clock: Clock; cursors: CursorCodec; clients: ClientGenerations; resources: GenerationResources },
  ) {}

  private async find(id: string): Promise<GenerationsTable> {
    const row = await findGeneration(this.deps.db, id);
    if (!row) throw new ApiError('generation_not_found', `No generation ${id}.`, { param: 'id' });
    return row;
  }

  private async resource(row: GenerationsTable): Promise<AdminGeneration> {
    const [resource] = await this.resourcesOf([row]);
    return resource!;
  }

  private async resourcesOf(rows: readonly GenerationsTable[]): Promise<AdminGeneration[]> {
    const resources = await this.deps.resources.resources(rows);
    // Operators also read why a hook failed open.
    return resources.map((resource, i) => ({ ...resource, moderation: generationModerationDetailOf(rows[i]!), key_id: rows[i]!.key_id }));
  }

  async get(id: string): Promise<AdminGeneration> {
    return this.resource(await this.find(id));
  }

  async list(query: AdminGenerationQuery): Promise<Schemas['AdminGenerationList']> {
    const { page, nextCursor } = await generationPage(this.deps.db, this.deps.cursors, query, 20);
    return { data: await this.resourcesOf(page), next_cursor: nextCursor };
  }

  async cancel(id: string, audit: AuditContext): Promise<AdminGeneration> {
    const row = await this.deps.clients.cancelRow(await this.find(id), {
      by: 'an administrator',
      onCanceled: (trx, { from, chargedCredits }) =>
        recordAuditEvent(
          trx,
          audit,
          { action: 'generation.canceled', target: id, before: { status: from }, after: { status: 'canceled', credits_charged: chargedCredits } },
          this.deps.clock.now(),
        ),
    });
    return this.resource(row);
  }
}

/** The /admin/generations operations: thin calls into AdminGenerations (the cancel carries the audit context). */
export function adminGenerationHandlers(
  admin: AdminGenerations,
): Pick<GatewayHandlers, 'listAdminGenerations' | 'getAdminGeneration' | 'cancelAdminGeneration'> {
  return {
    listAdminGenerations: async ({ query }) => ({ status: 200, body: await admin.list(query) }),
    getAdminGeneration: async ({ params }) => ({ status: 200, body: await admin.get(params.id) }),
    cancelAdminGeneration: async (request) => ({ status: 200, body: await admin.cancel(request.params.id, auditContextOf(request)) }),
  };
}
