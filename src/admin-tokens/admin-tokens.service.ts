import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import { type AuditContext, updateChange, withAuditEvent } from '../audit/audit-log';
import type { AdminPrincipal } from '../auth/principal';
import type { AdminTokensTable, Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { hashKey } from '../keys/key-secret';
import type { Clock } from '../shared/clock';
import { decodeCursor, pageOf } from '../shared/cursor';
import { requestedExpiry } from '../shared/expiry';
import { newId } from '../shared/ids';
import { type AdminTokenResource, type AdminTokenStatus, adminTokenSecrets, insufficientScope, toAdminTokenResource } from './admin-token.model';
import * as tokens from './admin-tokens.repository';

type Schemas = components['schemas'];
export type CreateAdminTokenInput = Schemas['CreateAdminTokenRequest'];

function tokenNotFound(id: string): ApiError {
  return new ApiError('admin_token_not_found', `No admin token with id ${id}.`, { param: 'id' });
}

/** Issuing, listing and revoking scoped admin tokens: the logic behind /admin/tokens. */
export class AdminTokensService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
  ) {}

  /** A token may grant only scopes its creator holds (the admin secret holds them all). */
  async createToken(input: CreateAdminTokenInput, creator: AdminPrincipal, audit: AuditContext): Promise<Schemas['CreatedAdminToken']> {
    const lacking = input.scopes.find((scope) => !creator.scopes.includes(scope));
    if (lacking !== undefined) throw insufficientScope(lacking, 'grant');
    const now = this.clock.now();
    const secret = adminTokenSecrets.generate();
    const row: AdminTokensTable = {
      id: newId('adt'),
      token_hash: hashKey(secret),
      hint: adminTokenSecrets.hint(secret),
      name: input.name,
      scopes: JSON.stringify(input.scopes),
      created_by: creator.actor,
      expires_at: requestedExpiry(input, now),
      created_at: now,
      revoked_at: null,
    };
    return withAuditEvent(this.db, audit, now, async (trx) => {
      await tokens.insertAdminToken(trx, row);
      const created = { ...toAdminTokenResource(row, now), token: secret };
      return { result: created, change: { action: 'admin_token.created', target: row.id, before: null, after: created } };
    });
  }

  async listTokens(query: { status?: AdminTokenStatus; limit?: number; cursor?: string }): Promise<Schemas['AdminTokenList']> {
    const limit = query.limit ?? 20;
    const now = this.clock.now();
    const rows = await tokens.listAdminTokens(this.db, {
      status: query.status,
      limit,
      after: query.cursor === undefined ? undefined : decodeCursor(query.cursor, 'adt'),
      now,
    });
    const { page, nextCursor } = pageOf(rows, limit);
    return { data: page.map((row) => toAdminTokenResource(row, now)), next_cursor: nextCursor };
  }

  async getToken(id: string): Promise<AdminTokenResource> {
    const row = await tokens.findAdminTokenById(this.db, id);
    if (!row) throw tokenNotFound(id);
    return toAdminTokenResource(row, this.clock.now());
  }

  /** Idempotent: revoking a revoked token changes (and records) nothing. */
  async revokeToken(id: string, audit: AuditContext): Promise<AdminTokenResource> {
    const now = this.clock.now();
    return withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await tokens.findAdminTokenById(trx, id, { lock: true });
      if (!current) throw tokenNotFound(id);
      const row = current.revoked_at === null ? await tokens.revokeAdminToken(trx, id, now) : current;
      const before = toAdminTokenResource(current, now);
      const after = toAdminTokenResource(row ?? current, now);
      return { result: after, change: updateChange('admin_token.revoked', id, before, after) };
    });
  }
}
