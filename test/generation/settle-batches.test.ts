import type { GatewayDatabase } from '../../src/db/database';
import type { GenerationAttemptsTable, GenerationsTable } from '../../src/db/schema';
import { listAttempts } from '../../src/generation/attempts.repository';
import { findGeneration, insertGeneration } from '../../src/generation/generations.repository';
import { settleGeneration, settleGenerations } from '../../src/generation/settlement.repository';
import { generationRow, migratedDatabase } from '../helpers/generation-rows';
import { testEngine } from '../helpers/test-database';

const running = (id: string, status: GenerationsTable['status'] = 'running'): GenerationsTable =>
  generationRow(id, { credits: 0, status, lease_owner: 'owner-a', lease_expires_at: 1_000, started_at: 0, runs: 1 });

const attempt = (generationId: string, seq: number, channelId: string, outcome = 'succeeded', errorCode: string | null = null): GenerationAttemptsTable => ({
  generation_id: generationId,
  seq,
  image_index: 0,
  channel_id: channelId,
  outcome,
  error_code: errorCode,
  latency_ms: 12 + seq,
  started_at: 1_700_000_000_000 + seq,
  // The catalog model each call was for (model fallbacks): written by the batched statement too.
  model: seq === 0 ? 'requested-model' : 'fallback-model',
  // The upstream's token report where it gave one (a succeeded call here): written by the batched statement too.
  upstream_usage: outcome === 'succeeded' ? JSON.stringify({ input_tokens: 3, output_tokens: 272, total_tokens: 275 }) : null,
});

const succeeded = (latencyMs: number) => ({ status: 'succeeded' as const, errorCode: null, latencyMs, completedAt: 1_700_000_000_500 + latencyMs });

/**
 * The request path's settlements, batched on PostgreSQL (StatementBatcher): one statement settles
 * several generations exactly as settleGeneration() settles each alone.
 */
(testEngine === 'postgres' ? describe : describe.skip)('settleGenerations: several settlements in one PostgreSQL statement', () => {
  let database: GatewayDatabase;
  let drop: () => Promise<void>;

  beforeAll(async () => ({ database, drop } = await migratedDatabase()));
  afterAll(() => drop());

  it('settles each active generation as settleGeneration does, leaves a settled one alone, writes every attempt row', async () => {
    const { db } = database;
    for (const row of [running('gen_b1'), running('gen_b2'), running('gen_b3', 'failed'), running('gen_alone')]) await insertGeneration(db, row);
    const settled = await settleGenerations(db, [
      { id: 'gen_b1', outcome: succeeded(101), attempts: [attempt('gen_b1', 0, 'chn_a', 'failed_over', 'provider_error'), attempt('gen_b1', 1, 'chn_b')] },
      { id: 'gen_b2', outcome: succeeded(102), attempts: [] },
      { id: 'gen_b3', outcome: succeeded(103), attempts: [attempt('gen_b3', 0, 'chn_a')] },
    ]);
    expect(settled).toEqual([true, true, false]);
    expect(await settleGeneration(db, 'gen_alone', succeeded(104), [attempt('gen_alone', 0, 'chn_a')])).toBe(true);

    // The same columns as the statement for one generation writes.
    const columns = (row: GenerationsTable | undefined) =>
      row && {
        status: row.status,
        latency_ms: row.latency_ms,
        completed_at: Number(row.completed_at),
        lease_owner: row.lease_owner,
        lease_expires_at: row.lease_expires_at,
        error_code: row.error_code,
      };
    expect(columns(await findGeneration(db, 'gen_b1'))).toEqual({
      status: 'succeeded',
      latency_ms: 101,
      completed_at: 1_700_000_000_601,
      lease_owner: null,
      lease_expires_at: null,
      error_code: null,
    });
    expect(columns(await findGeneration(db, 'gen_b2'))).toEqual({
      status: 'succeeded',
      latency_ms: 102,
      completed_at: 1_700_000_000_602,
      lease_owner: null,
      lease_expires_at: null,
      error_code: null,
    });
    expect(columns(await findGeneration(db, 'gen_alone'))).toEqual({
      status: 'succeeded',
      latency_ms: 104,
      completed_at: 1_700_000_000_604,
      lease_owner: null,
      lease_expires_at: null,
      error_code: null,
    });
    // Settled elsewhere before: unchanged.
    expect((await findGeneration(db, 'gen_b3'))?.status).toBe('failed');

    const attempts = async (id: string) => (await listAttempts(db, id)).map((a) => ({ ...a, started_at: Number(a.started_at) }));
    expect(await attempts('gen_b1')).toEqual([attempt('gen_b1', 0, 'chn_a', 'failed_over', 'provider_error'), attempt('gen_b1', 1, 'chn_b')]);
    expect(await attempts('gen_b2')).toEqual([]);
    // Attempts go in whether or not the row was still active, as with settleGeneration().
    expect(await attempts('gen_b3')).toEqual([attempt('gen_b3', 0, 'chn_a')]);
  });

  it('a settlement repeated (a retried batch) changes nothing the first did not', async () => {
    const { db } = database;
    await insertGeneration(db, running('gen_again'));
    const once = { id: 'gen_again', outcome: succeeded(50), attempts: [attempt('gen_again', 0, 'chn_a')] };
    expect(await settleGenerations(db, [once, { id: 'gen_missing', outcome: succeeded(1), attempts: [] }])).toEqual([true, false]);
    expect(await settleGenerations(db, [once, { id: 'gen_missing', outcome: succeeded(1), attempts: [] }])).toEqual([false, false]);
    expect(await listAttempts(db, 'gen_again')).toHaveLength(1);
  });
});
