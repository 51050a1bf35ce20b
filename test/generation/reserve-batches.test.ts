import type { GatewayDatabase } from '../../src/db/database';
import type { ApiKeysTable, GenerationsTable } from '../../src/db/schema';
import { findGeneration } from '../../src/generation/generations.repository';
import { type ReservationRequest, reserveWithGeneration, reserveWithGenerations } from '../../src/generation/reservations.repository';
import { generationRow, keyRow as keyRowAt, migratedDatabase } from '../helpers/generation-rows';
import { testEngine } from '../helpers/test-database';

const DAY_MS = 86_400_000;
const NOW = 1_800_000_000_000;

const keyRow = (id: string, overrides: Partial<ApiKeysTable> = {}): ApiKeysTable => keyRowAt(id, NOW, overrides);

const generation = (id: string, keyId: string, credits: number): GenerationsTable =>
  generationRow(id, {
    key_id: keyId,
    client_id: null,
    credits,
    status: 'running',
    created_at: NOW,
    request: '{"stored":true}',
    lease_owner: 'owner-a',
    lease_expires_at: NOW + 30_000,
    started_at: NOW,
    runs: 1,
  });

const request = (keyId: string, generationId: string, cost: number, overrides: Partial<ReservationRequest['reservation']> = {}): ReservationRequest => ({
  reservation: { keyId, keyHash: `hash_${keyId}`, cost, now: NOW, alertThresholds: [80, 50], ...overrides },
  row: generation(generationId, keyId, cost),
});

/**
 * Concurrent requests' one-statement reservations, batched on PostgreSQL (StatementBatcher): one
 * statement reserves for several keys exactly as reserveWithGeneration() reserves for each alone,
 * checked against it on twin keys.
 */
(testEngine === 'postgres' ? describe : describe.skip)('reserveWithGenerations: several keys reserved in one PostgreSQL statement', () => {
  let database: GatewayDatabase;
  let drop: () => Promise<void>;

  beforeAll(async () => ({ database, drop } = await migratedDatabase()));
  afterAll(() => drop());

  const book = async (id: string) => {
    const row = await database.db
      .selectFrom('api_keys')
      .select(['credits_used', 'usage_epoch', 'period_started_at', 'last_used_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return {
      credits_used: Number(row.credits_used),
      usage_epoch: Number(row.usage_epoch),
      period_started_at: Number(row.period_started_at),
      last_used_at: Number(row.last_used_at),
    };
  };

  it('answers and writes what one statement per key does: reserved, threshold crossed, quota short, period rolled over, key unusable', async () => {
    // Each case twice: key "<case>_1" reserved in the batch, "<case>_2" alone with reserveWithGeneration().
    const cases: Array<[string, Partial<ApiKeysTable>, number, Partial<ReservationRequest['reservation']>?]> = [
      ['plain', {}, 5],
      ['threshold', { credits_used: 45 }, 10], // crosses 50%: the general path writes its event
      ['short', { credits_used: 95 }, 10],
      ['used_up', { credits_used: 90 }, 10], // leaves no credits: the general path writes the exhaustion event
      ['rolled', { credits_used: 99, period_started_at: NOW - 31 * DAY_MS, created_at: NOW - 31 * DAY_MS }, 5],
      ['disabled', { status: 'disabled' }, 5],
      ['expired', { expires_at: NOW }, 5],
      ['rotated', {}, 5, { keyHash: 'hash_of_an_old_secret' }],
    ];
    for (const [name, overrides] of cases) {
      for (const twin of ['1', '2'])
        await database.db
          .insertInto('api_keys')
          .values(keyRow(`key_${name}_${twin}`, overrides))
          .execute();
    }
    const batch = cases.map(([name, , cost, overrides]) => request(`key_${name}_1`, `gen_${name}_1`, cost, overrides));
    const batched = await reserveWithGenerations(database.db, batch);
    for (const [index, [name, , cost, overrides]] of cases.entries()) {
      const alone = await reserveWithGeneration(
        database.db,
        request(`key_${name}_2`, `gen_${name}_2`, cost, overrides).reservation,
        generation(`gen_${name}_2`, `key_${name}_2`, cost),
      );
      expect([name, batched[index]]).toEqual([name, alone]);
      expect([name, await book(`key_${name}_1`)]).toEqual([name, await book(`key_${name}_2`)]);
      const [one, two] = [await findGeneration(database.db, `gen_${name}_1`), await findGeneration(database.db, `gen_${name}_2`)];
      expect([name, one && { ...one, id: 'gen', key_id: 'key' }]).toEqual([name, two && { ...two, id: 'gen', key_id: 'key' }]);
    }
    expect(batched.map((reserved) => reserved !== undefined)).toEqual([true, false, false, false, true, false, false, false]);
    // The rolled-over key starts a new book at this reservation's cost.
    expect(await book('key_rolled_1')).toMatchObject({ credits_used: 5, usage_epoch: 1, period_started_at: NOW - DAY_MS });
  });
});
