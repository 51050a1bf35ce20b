import { createHash } from 'node:crypto';
import type { GatewayDatabase } from '../../src/db/database';
import { insertGeneration } from '../../src/generation/generations.repository';
import { applyPromptRetention, withheldRequest } from '../../src/maintenance/prompt-retention';
import { generationRow, migratedDatabase } from '../helpers/generation-rows';
import { startTestGateway } from '../helpers/test-gateway';

/**
 * What is kept of a prompt once its generation is settled (src/maintenance/prompt-retention.ts):
 * the stored request's prompt becomes empty, `hash` keeps its SHA-256 beside it, and running rows
 * keep theirs (their worker needs it).
 */
const storedRequest = (prompt: string) =>
  JSON.stringify({ entry: { model: 'local-1' }, request: { prompt, n: 1, size: '64x64' }, keep_base64: false, mark_sends: true });

describe('prompt retention', () => {
  let database: GatewayDatabase;
  let drop: () => Promise<void>;

  beforeEach(async () => ({ database, drop } = await migratedDatabase()));
  afterEach(() => drop());

  const requestOf = async (id: string) => {
    const row = await database.db.selectFrom('generations').select(['request', 'prompt_retention']).where('id', '=', id).executeTakeFirstOrThrow();
    return {
      request: row.request === null ? null : (JSON.parse(row.request) as { request: Record<string, unknown> }).request,
      retention: row.prompt_retention,
    };
  };

  it('hash: settled rows keep only the SHA-256; running and queued rows keep the prompt; a second sweep changes nothing', async () => {
    const { db } = database;
    await insertGeneration(db, generationRow('gen_done', { status: 'succeeded', request: storedRequest('a secret lighthouse') }));
    await insertGeneration(db, generationRow('gen_failed', { status: 'failed', request: storedRequest('another secret') }));
    await insertGeneration(db, generationRow('gen_running', { status: 'running', request: storedRequest('still needed') }));
    await insertGeneration(db, generationRow('gen_queued', { status: 'queued', request: storedRequest('needed later') }));
    await insertGeneration(db, generationRow('gen_old', { status: 'succeeded', request: null }));

    expect(await applyPromptRetention(db, 'hash')).toBe(3);
    expect(await requestOf('gen_done')).toEqual({
      request: { prompt: '', prompt_sha256: createHash('sha256').update('a secret lighthouse').digest('hex'), n: 1, size: '64x64' },
      retention: 'hash',
    });
    expect((await requestOf('gen_failed')).retention).toBe('hash');
    // A row from before stored requests has nothing to withhold, and is marked all the same.
    expect(await requestOf('gen_old')).toEqual({ request: null, retention: 'hash' });
    expect(await requestOf('gen_running')).toEqual({ request: { prompt: 'still needed', n: 1, size: '64x64' }, retention: null });
    expect(await requestOf('gen_queued')).toEqual({ request: { prompt: 'needed later', n: 1, size: '64x64' }, retention: null });
    expect(await applyPromptRetention(db, 'hash')).toBe(0);
  });

  it('none keeps neither the prompt nor its hash; full changes nothing', async () => {
    const { db } = database;
    await insertGeneration(db, generationRow('gen_a', { status: 'canceled', request: storedRequest('cancelled secret') }));
    expect(await applyPromptRetention(db, 'full')).toBe(0);
    expect((await requestOf('gen_a')).request?.prompt).toBe('cancelled secret');
    expect(await applyPromptRetention(db, 'none')).toBe(1);
    expect(await requestOf('gen_a')).toEqual({ request: { prompt: '', n: 1, size: '64x64' }, retention: 'none' });
  });

  it('withheldRequest is pure and leaves every other field of the stored request as it was', () => {
    const before = storedRequest('x y z');
    const after = JSON.parse(withheldRequest(before, 'none') as string) as Record<string, unknown>;
    expect(after).toEqual({ ...(JSON.parse(before) as Record<string, unknown>), request: { prompt: '', n: 1, size: '64x64' } });
    expect(withheldRequest(JSON.stringify({ entry: {} }), 'hash')).toBeNull();
  });

  it('PROMPT_RETENTION=hash: a gateway starting on the database withholds the prompts of what is settled', async () => {
    const first = await startTestGateway();
    try {
      const { key } = await first.createKey();
      const res = await first.api.client(key, { prompt: 'a lighthouse kept as a hash', model: 'local-1', size: '64x64', response_format: 'b64_json' });
      expect(res.status).toBe(200);
      const storedPrompt = async () => {
        const row = await first.gateway.database.db
          .selectFrom('generations')
          .select(['request', 'prompt_retention'])
          .where('id', '=', res.body.id)
          .executeTakeFirstOrThrow();
        return { request: (JSON.parse(row.request as string) as { request: Record<string, unknown> }).request, retention: row.prompt_retention };
      };
      expect(await storedPrompt()).toMatchObject({ request: { prompt: 'a lighthouse kept as a hash' }, retention: null });
      // Its sweeper runs once at start, over the same database.
      const second = await startTestGateway({ DATABASE_URL: first.databaseUrl, PROMPT_RETENTION: 'hash' });
      await second.close();
      expect(await storedPrompt()).toMatchObject({
        request: { prompt: '', prompt_sha256: createHash('sha256').update('a lighthouse kept as a hash').digest('hex') },
        retention: 'hash',
      });
    } finally {
      await first.close();
    }
  });
});
