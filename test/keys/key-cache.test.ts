import type { GatewayDatabase } from '../../src/db/database';
import type { ApiKeysTable } from '../../src/db/schema';
import { SqliteKeyLookup } from '../../src/keys/key-cache';
import { foundKeyOf } from '../../src/keys/key.model';
import { findKeyByHash, insertKey, updateKey } from '../../src/keys/keys.repository';
import { keyRow as keyRowAt, migratedDatabase } from '../helpers/generation-rows';
import { testEngine } from '../helpers/test-database';

const NOW = 1_800_000_000_000;

/** A key with every policy column set, so the parsed client key shows each. */
const keyRow = (id: string, overrides: Partial<ApiKeysTable> = {}): ApiKeysTable =>
  keyRowAt(id, NOW, {
    allowed_providers: '["local","jimeng"]',
    max_concurrent: 2,
    allowed_ips: '["10.0.0.0/8"]',
    allowed_models: '["local-1"]',
    metadata: '{"team":"a"}',
    ...overrides,
  });

/**
 * The SQLite key cache keeps what the client-key guard needs of a row (its status columns and the
 * parsed client key), made once when the row is read: requests that find a cached key share it.
 */
(testEngine === 'sqlite' ? describe : describe.skip)('SqliteKeyLookup: found keys by hash', () => {
  let database: GatewayDatabase;
  let drop: () => Promise<void>;

  beforeAll(async () => ({ database, drop } = await migratedDatabase()));
  afterAll(() => drop());

  it('answers the client key parsed from the row, the same object on every hit, and the row as changed after changed(id)', async () => {
    const { db } = database;
    let now = NOW;
    const lookup = new SqliteKeyLookup(database.dataVersion as () => number, 60_000, () => now);
    await insertKey(db, keyRow('key_cached'));

    const found = await lookup.find(db, 'hash_key_cached');
    expect(found).toEqual(foundKeyOf((await findKeyByHash(db, 'hash_key_cached'))!));
    expect(found?.client).toMatchObject({
      id: 'key_cached',
      keyHash: 'hash_key_cached',
      allowedProviders: ['local', 'jimeng'],
      policy: { maxConcurrent: 2, allowedIps: ['10.0.0.0/8'], allowedModels: ['local-1'], alertThresholds: [50, 80] },
    });
    expect(await lookup.find(db, 'hash_key_cached')).toBe(found);
    expect(await lookup.find(db, 'hash_unknown')).toBeUndefined();
    // Shared by the requests that find it: frozen, so no request can change what the next one sees.
    expect(() => (found?.client.allowedProviders as string[]).push('other')).toThrow(TypeError);
    expect(() => Object.assign(found?.client.policy as object, { maxConcurrent: 9 })).toThrow(TypeError);

    // An admin change on this connection: the cached key stays until changed(id), then the row is read again.
    await updateKey(db, 'key_cached', { status: 'disabled', rate_limit_rpm: 5, updated_at: NOW + 1 });
    expect(await lookup.find(db, 'hash_key_cached')).toBe(found);
    await lookup.changed('key_cached');
    const changed = await lookup.find(db, 'hash_key_cached');
    expect(changed).toMatchObject({ status: 'disabled', client: { rateLimitRpm: 5 } });

    // Past the TTL the row is read again too.
    await updateKey(db, 'key_cached', { status: 'active', updated_at: NOW + 2 });
    now += 60_000;
    expect(await lookup.find(db, 'hash_key_cached')).toMatchObject({ status: 'active' });
  });
});
