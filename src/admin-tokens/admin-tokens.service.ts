import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import { type AuditContext, recordAuditEvent, updateChange, withAuditEvent } from '../audit/audit-log';
import type { AdminPrincipal } from '../auth/principal';
import type { AdminTokensTable, Database } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { hashKey } from '../keys/key-secret';
import { type Clock, toIso } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { requestedExpiry } from '../shared/expiry';
import { newId } from '../shared/ids';
import {
  type AdminScope,
  type AdminTokenResource,
  type AdminTokenStatus,
  adminTokenSecrets,
  boundedExpiry,
  inactiveTokenError,
  insufficientScope,
  toAdminTokenResource,
} from './admin-token.model';
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
    private readonly cursors: CursorCodec,
  ) {}

  /**
   * A token may grant only scopes its creator holds (the admin secret holds them all), and its
   * child expires no later than it does: a later expiry, or none, is capped at the creator's.
   */
  async createToken(input: CreateAdminTokenInput, creator: AdminPrincipal, audit: AuditContext): Promise<Schemas['CreatedAdminToken']> {
    const lacking = input.scopes.find((scope) => !creator.scopes.includes(scope));
    if (lacking !== undefined) throw insufficientScope(lacking, 'grant');
    const now = this.clock.now();
    const requested = requestedExpiry(input, now);
    const secret = adminTokenSecrets.generate();
    return withAuditEvent(this.db, audit, now, async (trx) => {
      let expiresAt = requested;
      if (creator.credential === 'admin_token') {
        // Locked and read again in this transaction: a revocation that committed since the guard
        // read the creator must not miss the child (revokeToken locks the same row).
        const parent = await tokens.findAdminTokenById(trx, creator.actor, { lock: true });
        if (!parent) throw new ApiError('invalid_admin_token', 'The admin token is malformed or unknown.');
        const inactive = inactiveTokenError(parent, now);
        if (inactive) throw inactive;
        expiresAt = boundedExpiry(requested, parent.expires_at);
      }
      const row: AdminTokensTable = {
        id: newId('adt'),
        token_hash: hashKey(secret),
        hint: adminTokenSecrets.hint(secret),
        name: input.name,
        scopes: JSON.stringify(input.scopes),
        created_by: creator.actor,
        expires_at: expiresAt,
        created_at: now,
        revoked_at: null,
      };
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
      after: query.cursor === undefined ? undefined : this.cursors.position(query.cursor, 'adt'),
      now,
    });
    const { page, nextCursor } = this.cursors.pageOf(rows, limit, 'adt');
    return { data: page.map((row) => toAdminTokenResource(row, now)), next_cursor: nextCursor };
  }

  async getToken(id: string): Promise<AdminTokenResource> {
    const row = await tokens.findAdminTokenById(this.db, id);
    if (!row) throw tokenNotFound(id);
    return toAdminTokenResource(row, this.clock.now());
  }

  /** The caller's own identity and scopes (GET /admin/whoami): root holds every scope and never expires;
   * an Access principal expires with its JWT. */
  async identityOf(principal: AdminPrincipal): Promise<Schemas['AdminIdentity']> {
    if (principal.credential === 'admin_secret') return { actor: 'root', kind: 'admin_secret', name: null, scopes: [...principal.scopes], expires_at: null };
    if (principal.session) {
      const { email, subject, expiresAt } = principal.session;
      return { actor: principal.actor, kind: 'console_session', name: email ?? subject, scopes: [...principal.scopes], expires_at: toIso(expiresAt) };
    }
    if (principal.access) {
      const { name, expiresAt } = principal.access;
      return { actor: principal.actor, kind: 'access', name, scopes: [...principal.scopes], expires_at: toIso(expiresAt) };
    }
    const token = await this.getToken(principal.actor);
    return { actor: token.id, kind: 'admin_token', name: token.name, scopes: token.scopes, expires_at: token.expires_at };
  }

  /**
   * Idempotent: revoking a revoked token changes (and records) nothing. Revokes the token's
   * descendants too (each with its own audit event): what a token minted dies with it. A token may
   * revoke only tokens whose scopes it holds all of (root may revoke any).
   */
  async revokeToken(id: string, revoker: AdminPrincipal, audit: AuditContext): Promise<AdminTokenResource> {
    const now = this.clock.now();
    return withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await tokens.findAdminTokenById(trx, id, { lock: true });
      if (!current) throw tokenNotFound(id);
      const lacking = (JSON.parse(current.scopes) as AdminScope[]).find((scope) => !revoker.scopes.includes(scope));
      if (lacking !== undefined) throw insufficientScope(lacking, 'revoke');
      await this.revokeDescendants(trx, id, audit, now);
      const row = current.revoked_at === null ? await tokens.revokeAdminToken(trx, id, now) : current;
      const before = toAdminTokenResource(current, now);
      const after = toAdminTokenResource(row ?? current, now);
      return { result: after, change: updateChange('admin_token.revoked', id, before, after) };
    });
  }

  /** Walks the lineage down by created_by, generation by generation, revoking what is still live. */
  private async revokeDescendants(trx: Kysely<Database>, rootId: string, audit: AuditContext, now: number): Promise<void> {
    const seen = new Set([rootId]);
    let parents = [rootId];
    while (parents.length > 0) {
      const children = (await tokens.lockChildrenOf(trx, parents)).filter((child) => !seen.has(child.id));
      for (const child of children) {
        seen.add(child.id);
        if (child.revoked_at !== null) continue;
        const revoked = (await tokens.revokeAdminToken(trx, child.id, now)) ?? child;
        const change = updateChange('admin_token.revoked', child.id, toAdminTokenResource(child, now), toAdminTokenResource(revoked, now));
        if (change) await recordAuditEvent(trx, audit, change, now);
      }
      parents = children.map((child) => child.id);
    }
  }
}
