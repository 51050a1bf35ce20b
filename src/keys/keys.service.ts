import type { components } from '../../generated/gateway';
import { ApiError } from '../errors/api-error';
import { type Clock, DAY_MS } from '../shared/clock';
import { decodeCursor, pageOf } from '../shared/cursor';
import { newId } from '../shared/ids';
import type { CatalogModel } from '../config/catalog';
import { emitKeyDisabled } from '../webhooks/key-events';
import { newKeyPolicyColumns, policyColumns } from './key-policy';
import { generateKeySecret, hashKey, keyHint } from './key-secret';
import { type ApiKeyRow, type CreatedKeyResource, type KeyResource, type KeyStatus, toKeyResource } from './key.model';
import * as keys from './keys.repository';
import { currentPeriodStart } from './quota-period';

type Schemas = components['schemas'];
export type CreateKeyInput = Schemas['CreateKeyRequest'];
export type UpdateKeyInput = Schemas['UpdateKeyRequest'];
export type SetQuotaInput = Schemas['SetQuotaRequest'];
export type KeyList = Schemas['KeyList'];

const DEFAULT_RATE_LIMIT_RPM = 30;
const DEFAULT_PROVIDERS = ['jimeng'];

function keyNotFound(id: string): ApiError {
  return new ApiError('key_not_found', `No key with id ${id}.`, { param: 'id' });
}

/** Issuing and managing client keys: the logic behind the /admin/keys routes. */
export class KeysService {
  constructor(
    private readonly db: keys.Db,
    private readonly clock: Clock,
    private readonly knownProviders: ReadonlySet<string>,
    /** For `allowed_models`. */
    private readonly catalog: ReadonlyMap<string, CatalogModel> = new Map(),
  ) {}

  private checkProviders(providers: string[]): void {
    const unknown = providers.filter((p) => !this.knownProviders.has(p));
    if (unknown.length > 0) {
      throw new ApiError(
        'invalid_request',
        `Unknown provider ${unknown.join(', ')}. Known providers: ${[...this.knownProviders].join(', ')}.`,
        { param: 'allowed_providers' },
      );
    }
  }

  private checkFutureExpiry(expiresAt: string, now: number): number {
    const at = Date.parse(expiresAt);
    if (!(at > now)) throw new ApiError('invalid_request', 'expires_at must be in the future.', { param: 'expires_at' });
    return at;
  }

  private async requireKey(id: string): Promise<ApiKeyRow> {
    const row = await keys.findKeyById(this.db, id);
    if (!row) throw keyNotFound(id);
    return row;
  }

  private async update(id: string, changes: Parameters<typeof keys.updateKey>[2]): Promise<ApiKeyRow> {
    const now = this.clock.now();
    // A disable and its key.disabled event commit together (the event outbox).
    const row = await this.db.transaction().execute(async (trx) => {
      const updated = await keys.updateKey(trx, id, { ...changes, updated_at: now });
      if (updated && changes.status === 'disabled') await emitKeyDisabled(trx, id, now);
      return updated;
    });
    if (!row) throw keyNotFound(id);
    return row;
  }

  async createKey(input: CreateKeyInput): Promise<CreatedKeyResource> {
    const now = this.clock.now();
    if (input.expires_at !== undefined && input.expires_in_days !== undefined) {
      throw new ApiError('invalid_request', 'Give expires_at or expires_in_days, not both.', { param: 'expires_at' });
    }
    const allowedProviders = input.allowed_providers ?? DEFAULT_PROVIDERS;
    this.checkProviders(allowedProviders);
    let expiresAt: number | null = null;
    if (input.expires_at !== undefined) expiresAt = this.checkFutureExpiry(input.expires_at, now);
    if (input.expires_in_days !== undefined) expiresAt = now + input.expires_in_days * DAY_MS;

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
      rate_limit_rpm: input.rate_limit_rpm ?? DEFAULT_RATE_LIMIT_RPM,
      allowed_providers: JSON.stringify(allowedProviders),
      expires_at: expiresAt,
      created_at: now,
      updated_at: now,
      disabled_at: null,
      last_used_at: null,
      ...newKeyPolicyColumns(input, this.catalog),
    };
    await keys.insertKey(this.db, row);
    return { ...toKeyResource(row, now), key: secret };
  }

  async listKeys(query: { status?: KeyStatus; owner?: string; metadata?: string; limit?: number; cursor?: string }): Promise<KeyList> {
    const limit = query.limit ?? 20;
    const now = this.clock.now();
    const rows = await keys.listKeys(this.db, {
      status: query.status,
      owner: query.owner,
      metadata: metadataFilter(query.metadata),
      limit,
      after: query.cursor === undefined ? undefined : decodeCursor(query.cursor, 'key'),
      now,
    });
    const { page, nextCursor } = pageOf(rows, limit);
    return { data: page.map((row) => toKeyResource(row, now)), next_cursor: nextCursor };
  }

  async getKey(id: string): Promise<KeyResource> {
    return toKeyResource(await this.requireKey(id), this.clock.now());
  }

  async disableKey(id: string): Promise<KeyResource> {
    const current = await this.requireKey(id);
    if (current.status === 'disabled') return toKeyResource(current, this.clock.now());
    const row = await this.update(id, { status: 'disabled', disabled_at: this.clock.now() });
    return toKeyResource(row, this.clock.now());
  }

  async updateKey(id: string, input: UpdateKeyInput): Promise<KeyResource> {
    const now = this.clock.now();
    const current = await this.requireKey(id);
    const changes: Parameters<typeof keys.updateKey>[2] = policyColumns(input, this.catalog);
    if (input.name !== undefined) changes.name = input.name;
    if (input.owner !== undefined) changes.owner = input.owner;
    if (input.rate_limit_rpm !== undefined) changes.rate_limit_rpm = input.rate_limit_rpm;
    if (input.allowed_providers !== undefined) {
      this.checkProviders(input.allowed_providers);
      changes.allowed_providers = JSON.stringify(input.allowed_providers);
    }
    if (input.expires_at !== undefined) {
      changes.expires_at = input.expires_at === null ? null : this.checkFutureExpiry(input.expires_at, now);
    }
    if (input.status === 'active' && current.status !== 'active') {
      changes.status = 'active';
      changes.disabled_at = null;
    }
    if (input.status === 'disabled' && current.status !== 'disabled') {
      changes.status = 'disabled';
      changes.disabled_at = now;
    }
    return toKeyResource(await this.update(id, changes), now);
  }

  async setQuota(id: string, input: SetQuotaInput): Promise<KeyResource> {
    const now = this.clock.now();
    const current = await this.requireKey(id);
    const periodDays = input.quota_period_days ?? current.quota_period_days;
    const row = await keys.setQuota(this.db, id, {
      creditsQuota: input.credits_quota,
      periodDays,
      periodStart: currentPeriodStart(current.created_at, periodDays, now),
      lapsedBefore: currentPeriodStart(current.created_at, current.quota_period_days, now),
      resetUsage: input.reset_usage ?? false,
      now,
    });
    if (!row) throw keyNotFound(id);
    return toKeyResource(row, now);
  }

  async rotateKey(id: string): Promise<CreatedKeyResource> {
    const secret = generateKeySecret();
    const row = await this.update(id, { key_hash: hashKey(secret), hint: keyHint(secret) });
    return { ...toKeyResource(row, this.clock.now()), key: secret };
  }
}

/** `name:value` (the spec checks the shape) into a filter. */
function metadataFilter(filter: string | undefined): { name: string; value: string } | undefined {
  if (filter === undefined) return undefined;
  const colon = filter.indexOf(':');
  return { name: filter.slice(0, colon), value: filter.slice(colon + 1) };
}
