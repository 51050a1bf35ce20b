import type { components } from '../../generated/gateway';
import { type AuditContext, updateChange, withAuditEvent } from '../audit/audit-log';
import { ApiError } from '../errors/api-error';
import type { Clock } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { futureExpiry, requestedExpiry } from '../shared/expiry';
import { newId } from '../shared/ids';
import type { CatalogModel } from '../config/catalog';
import { emitKeyDisabled } from '../events/key-events';
import { findProjectById } from '../projects/projects.repository';
import { newKeyPolicyColumns, policyColumns } from './key-policy';
import { modelRefusal } from './rules/model-permission';
import { generateKeySecret, hashKey, keyHint } from './key-secret';
import { type ApiKeyRow, type CreatedKeyResource, type KeyResource, type KeyStatus, toKeyResource } from './key.model';
import * as keys from './keys.repository';
import { requestedQuota } from './rules/quota-period';

type Schemas = components['schemas'];
export type CreateKeyInput = Schemas['CreateKeyRequest'];
export type UpdateKeyInput = Schemas['UpdateKeyRequest'];
export type SetQuotaInput = Schemas['SetQuotaRequest'];
export type KeyList = Schemas['KeyList'];

const DEFAULT_RATE_LIMIT_RPM = 30;
/** A key created without `allowed_providers` gets these (the spec's default; the built-in `local` renderer is not among them). */
export const DEFAULT_PROVIDERS: readonly string[] = ['jimeng'];

function keyNotFound(id: string): ApiError {
  return new ApiError('key_not_found', `No key with id ${id}.`, { param: 'id' });
}

/**
 * Issuing and managing client keys: the logic behind the /admin/keys routes. Every change runs in a
 * transaction that also records its audit event (before/after of the changed fields).
 */
export class KeysService {
  constructor(
    private readonly db: keys.Db,
    private readonly clock: Clock,
    private readonly knownProviders: ReadonlySet<string>,
    private readonly cursors: CursorCodec,
    /** For `allowed_models`. */
    private readonly catalog: ReadonlyMap<string, CatalogModel> = new Map(),
    /** Told of every committed change of a key (the key cache of every replica drops it). */
    private readonly onChanged: (id: string) => Promise<void> = async () => undefined,
  ) {}

  private checkProviders(providers: string[]): void {
    const unknown = providers.filter((p) => !this.knownProviders.has(p));
    if (unknown.length > 0) {
      throw new ApiError('invalid_request', `Unknown provider ${unknown.join(', ')}. Known providers: ${[...this.knownProviders].join(', ')}.`, {
        param: 'allowed_providers',
      });
    }
  }

  /**
   * 400 invalid_request when the key's `allowed_providers` and `allowed_models` together leave it no
   * model of the catalog (every request of it would be refused): `param` names the list to change.
   */
  private checkSomeModelAllowed(allowedProviders: readonly string[], allowedModels: readonly string[] | null): void {
    if (this.catalog.size === 0) return;
    const permissions = { allowedProviders, allowedModels, project: null };
    if ([...this.catalog.values()].some((entry) => modelRefusal(permissions, entry) === undefined)) return;
    // The spec fills in the default before the request gets here, so a key that did not ask for it is told.
    const isDefault = allowedProviders.length === DEFAULT_PROVIDERS.length && allowedProviders.every((p, i) => p === DEFAULT_PROVIDERS[i]);
    const providers = `allowed_providers [${allowedProviders.join(', ')}]${isDefault ? ' (the default when none is given)' : ''}`;
    if (allowedModels === null) {
      const offered = [...new Set([...this.catalog.values()].map((entry) => entry.provider))].join(', ');
      throw new ApiError('invalid_request', `With ${providers} this key could use no model: the catalog's models are served by ${offered}.`, {
        param: 'allowed_providers',
      });
    }
    const servedBy = allowedModels.map((model) => `${model} by ${this.catalog.get(model)?.provider ?? 'no provider'}`).join(', ');
    throw new ApiError(
      'invalid_request',
      `With ${providers} and allowed_models [${allowedModels.join(', ')}] this key could use no model: ${servedBy}. Add the provider to allowed_providers, or pick models of its providers.`,
      { param: 'allowed_models' },
    );
  }

  /** A key's `project_id` must name a project (disabled ones included: the key is then refused until it is enabled). */
  private async checkProject(db: keys.Db, projectId: string | null): Promise<void> {
    if (projectId === null || (await findProjectById(db, projectId))) return;
    throw new ApiError('invalid_request', `No project with id ${projectId}.`, { param: 'project_id' });
  }

  /** Inside a change's transaction the row is locked (PostgreSQL), so "before" is what the change replaced. */
  private async requireKey(id: string, db: keys.Db = this.db, options: { lock?: boolean } = {}): Promise<ApiKeyRow> {
    const row = await keys.findKeyById(db, id, options);
    if (!row) throw keyNotFound(id);
    return row;
  }

  private async update(db: keys.Db, id: string, changes: Parameters<typeof keys.updateKey>[2]): Promise<ApiKeyRow> {
    const now = this.clock.now();
    const row = await keys.updateKey(db, id, { ...changes, updated_at: now });
    // A disable and its key.disabled event commit together (the event outbox; `db` is the change's transaction).
    if (row && changes.status === 'disabled') await emitKeyDisabled(db, id, now);
    if (!row) throw keyNotFound(id);
    return row;
  }

  /**
   * Runs a change of one key in a transaction with its audit event: `change` gets the locked row
   * and returns the new one; `present` makes the response (the event records what differs).
   */
  private changeKey<R extends KeyResource>(
    id: string,
    action: string,
    audit: AuditContext,
    change: (trx: keys.Db, current: ApiKeyRow, now: number) => Promise<ApiKeyRow>,
    present: (row: ApiKeyRow, now: number) => R,
    audited: (row: ApiKeyRow, now: number) => Record<string, unknown> = toKeyResource,
  ): Promise<R> {
    const now = this.clock.now();
    return withAuditEvent(this.db, audit, now, async (trx) => {
      const current = await this.requireKey(id, trx, { lock: true });
      const row = await change(trx, current, now);
      const after = present(row, now);
      const auditedAfter = audited === toKeyResource ? after : audited(row, now);
      return { result: after, change: updateChange(action, id, audited(current, now), auditedAfter) };
    }).then(async (result) => {
      await this.onChanged(id);
      return result;
    });
  }

  async createKey(input: CreateKeyInput, audit: AuditContext): Promise<CreatedKeyResource> {
    const now = this.clock.now();
    const expiresAt = requestedExpiry(input, now);
    const allowedProviders = input.allowed_providers ?? [...DEFAULT_PROVIDERS];
    this.checkProviders(allowedProviders);
    const policy = newKeyPolicyColumns(input, this.catalog);
    this.checkSomeModelAllowed(allowedProviders, parseList(policy.allowed_models));

    const secret = generateKeySecret();
    const row: ApiKeyRow = {
      id: newId('key'),
      key_hash: hashKey(secret),
      hint: keyHint(secret),
      name: input.name,
      owner: input.owner,
      status: 'active',
      credits_quota: input.credits_quota,
      credits_used: 0,
      quota_period_days: input.quota_period_days,
      period_started_at: now,
      usage_epoch: 1,
      rate_limit_rpm: input.rate_limit_rpm ?? DEFAULT_RATE_LIMIT_RPM,
      allowed_providers: JSON.stringify(allowedProviders),
      expires_at: expiresAt,
      created_at: now,
      updated_at: now,
      disabled_at: null,
      last_used_at: null,
      ...policy,
      project_id: input.project_id ?? null,
    };
    return withAuditEvent(this.db, audit, now, async (trx) => {
      await this.checkProject(trx, row.project_id ?? null);
      await keys.insertKey(trx, row);
      const created = { ...toKeyResource(row, now), key: secret };
      return { result: created, change: { action: 'key.created', target: row.id, before: null, after: created } };
    });
  }

  async listKeys(query: { status?: KeyStatus; owner?: string; metadata?: string; projectId?: string; limit?: number; cursor?: string }): Promise<KeyList> {
    const limit = query.limit ?? 20;
    const now = this.clock.now();
    const rows = await keys.listKeys(this.db, {
      status: query.status,
      owner: query.owner,
      projectId: query.projectId,
      metadata: metadataFilter(query.metadata),
      limit,
      after: query.cursor === undefined ? undefined : this.cursors.position(query.cursor, 'key'),
      now,
    });
    const { page, nextCursor } = this.cursors.pageOf(rows, limit, 'key');
    return { data: page.map((row) => toKeyResource(row, now)), next_cursor: nextCursor };
  }

  async getKey(id: string): Promise<KeyResource> {
    return toKeyResource(await this.requireKey(id), this.clock.now());
  }

  /** Idempotent: disabling a disabled key changes (and records) nothing. */
  async disableKey(id: string, audit: AuditContext): Promise<KeyResource> {
    return this.changeKey(
      id,
      'key.disabled',
      audit,
      async (trx, current, now) => (current.status === 'disabled' ? current : this.update(trx, id, { status: 'disabled', disabled_at: now })),
      toKeyResource,
    );
  }

  async updateKey(id: string, input: UpdateKeyInput, audit: AuditContext): Promise<KeyResource> {
    if (input.allowed_providers !== undefined) this.checkProviders(input.allowed_providers);
    return this.changeKey(
      id,
      'key.updated',
      audit,
      async (trx, current, now) => {
        const changes: Parameters<typeof keys.updateKey>[2] = policyColumns(input, this.catalog);
        if (input.name !== undefined) changes.name = input.name;
        if (input.owner !== undefined) changes.owner = input.owner;
        if (input.rate_limit_rpm !== undefined) changes.rate_limit_rpm = input.rate_limit_rpm;
        if (input.project_id !== undefined) {
          await this.checkProject(trx, input.project_id);
          changes.project_id = input.project_id;
        }
        if (input.allowed_providers !== undefined) changes.allowed_providers = JSON.stringify(input.allowed_providers);
        if (input.allowed_providers !== undefined || input.allowed_models !== undefined) {
          const providers = parseList(changes.allowed_providers ?? current.allowed_providers) ?? [];
          this.checkSomeModelAllowed(providers, parseList(changes.allowed_models === undefined ? current.allowed_models : changes.allowed_models));
        }
        if (input.expires_at !== undefined) {
          changes.expires_at = input.expires_at === null ? null : futureExpiry(input.expires_at, now);
        }
        if (input.status === 'active' && current.status !== 'active') {
          changes.status = 'active';
          changes.disabled_at = null;
        }
        if (input.status === 'disabled' && current.status !== 'disabled') {
          changes.status = 'disabled';
          changes.disabled_at = now;
        }
        return this.update(trx, id, changes);
      },
      toKeyResource,
    );
  }

  async setQuota(id: string, input: SetQuotaInput, audit: AuditContext): Promise<KeyResource> {
    return this.changeKey(
      id,
      'key.quota_set',
      audit,
      async (trx, _current, now) => {
        // Usage and period are decided in the statement, from the row as it is then (see keys.setQuota).
        const row = await keys.setQuota(trx, id, requestedQuota(input, now));
        if (!row) throw keyNotFound(id);
        return row;
      },
      toKeyResource,
      withUsageEpoch,
    );
  }

  async rotateKey(id: string, audit: AuditContext): Promise<CreatedKeyResource> {
    const secret = generateKeySecret();
    return this.changeKey(
      id,
      'key.rotated',
      audit,
      (trx) => this.update(trx, id, { key_hash: hashKey(secret), hint: keyHint(secret) }),
      (row, now): CreatedKeyResource => ({ ...toKeyResource(row, now), key: secret }),
    );
  }
}

/**
 * What a quota change's audit event compares: the resource plus the usage book, so reset_usage on a
 * key with nothing used (the resource unchanged) still leaves its event.
 */
function withUsageEpoch(row: ApiKeyRow, now: number): Record<string, unknown> {
  return { ...toKeyResource(row, now), usage_epoch: Number(row.usage_epoch) };
}

/** A JSON list column (allowed_providers, allowed_models) as a list; null stays null. */
function parseList(column: string | null | undefined): string[] | null {
  return column === null || column === undefined ? null : (JSON.parse(column) as string[]);
}

/** `name:value` (the spec checks the shape) into a filter. */
function metadataFilter(filter: string | undefined): { name: string; value: string } | undefined {
  if (filter === undefined) return undefined;
  const colon = filter.indexOf(':');
  return { name: filter.slice(0, colon), value: filter.slice(colon + 1) };
}
