import { createHash } from 'node:crypto';
import type { GatewayDatabase } from '../../src/db/database';
import { insertGeneration } from '../../src/generation/generations.repository';
import { applyPromptRetention, withheldRequest } from '../../src/maintenance/prompt-retention';
import { insertStoredImages } from '../../src/images/images.repository';
import type { StoredImagesTable } from '../../src/db/schema';
import { generationRow, migratedDatabase } from '../helpers/generation-rows';
import { dataUri, testPng } from '../helpers/test-images';
import { startTestGateway } from '../helpers/test-gateway';

/**
 * What is kept of a prompt once its generation is settled (src/maintenance/prompt-retention.ts):
 * the stored request's prompt becomes empty, `hash` keeps its SHA-256 beside it, and running rows
 * keep theirs (their worker needs it).
 */
const storedRequest = (prompt: string) =>
  JSON.stringify({ entry: { model: 'local-1' }, request: { prompt, n: 1, size: '64x64' }, keep_base64: false, mark_sends: true });

const NOW = 1_800_000_000_000;
const DAY = 86_400_000;

function imageRow(id: string, generationId: string, role: StoredImagesTable['role']): StoredImagesTable {
  return {
    id,
    generation_id: generationId,
    position: 0,
    role,
    key_id: null,
    client_id: 'test',
    content_type: 'image/png',
    byte_size: 10,
    sha256: 'ab'.repeat(32),
    width: 1,
    height: 1,
    created_at: NOW - DAY,
    expires_at: NOW + 30 * DAY,
    deleted_at: null,
  };
}

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

    expect(await applyPromptRetention(db, 'hash', NOW)).toBe(3);
    expect(await requestOf('gen_done')).toEqual({
      request: { prompt: '', prompt_sha256: createHash('sha256').update('a secret lighthouse').digest('hex'), n: 1, size: '64x64' },
      retention: 'hash',
    });
    expect((await requestOf('gen_failed')).retention).toBe('hash');
    // A row from before stored requests has nothing to withhold, and is marked all the same.
    expect(await requestOf('gen_old')).toEqual({ request: null, retention: 'hash' });
    expect(await requestOf('gen_running')).toEqual({ request: { prompt: 'still needed', n: 1, size: '64x64' }, retention: null });
    expect(await requestOf('gen_queued')).toEqual({ request: { prompt: 'needed later', n: 1, size: '64x64' }, retention: null });
    expect(await applyPromptRetention(db, 'hash', NOW)).toBe(0);
  });

  it('none keeps neither the prompt nor its hash; full changes nothing', async () => {
    const { db } = database;
    await insertGeneration(db, generationRow('gen_a', { status: 'canceled', request: storedRequest('cancelled secret') }));
    expect(await applyPromptRetention(db, 'full', NOW)).toBe(0);
    expect((await requestOf('gen_a')).request?.prompt).toBe('cancelled secret');
    expect(await applyPromptRetention(db, 'none', NOW)).toBe(1);
    expect(await requestOf('gen_a')).toEqual({ request: { prompt: '', n: 1, size: '64x64' }, retention: 'none' });
  });

  it("input images and masks follow the prompt: they expire when it is withheld; outputs and a running generation's inputs keep theirs", async () => {
    const { db } = database;
    await insertGeneration(db, generationRow('gen_done', { status: 'succeeded', request: storedRequest('edit this') }));
    await insertGeneration(db, generationRow('gen_running', { status: 'running', request: storedRequest('still editing') }));
    await insertStoredImages(db, [
      imageRow('img_in', 'gen_done', 'input'),
      imageRow('img_mask', 'gen_done', 'mask'),
      imageRow('img_out', 'gen_done', 'output'),
      imageRow('img_running_in', 'gen_running', 'input'),
    ]);
    expect(await applyPromptRetention(db, 'hash', NOW)).toBe(1);
    const expiries = Object.fromEntries(
      (await db.selectFrom('stored_images').select(['id', 'expires_at']).execute()).map((row) => [row.id, Number(row.expires_at)]),
    );
    expect(expiries).toEqual({ img_in: NOW, img_mask: NOW, img_out: NOW + 30 * DAY, img_running_in: NOW + 30 * DAY });
  });

  it('withheldRequest is pure and leaves every other field of the stored request as it was', () => {
    const before = storedRequest('x y z');
    const after = JSON.parse(withheldRequest(before, 'none') as string) as Record<string, unknown>;
    expect(after).toEqual({ ...(JSON.parse(before) as Record<string, unknown>), request: { prompt: '', n: 1, size: '64x64' } });
    expect(withheldRequest(JSON.stringify({ entry: {} }), 'hash')).toBeNull();
  });

  it("withheldRequest drops an internal request's negative prompt too; `none` on a request kept as a hash drops the hash, `hash` keeps it", () => {
    const internal = JSON.stringify({ entry: {}, request: { prompt: 'a boat', negativePrompt: 'no sails' } });
    const hashed = withheldRequest(internal, 'hash') as string;
    const sha = createHash('sha256').update('a boat').digest('hex');
    expect(JSON.parse(hashed)).toEqual({ entry: {}, request: { prompt: '', prompt_sha256: sha } });
    expect(JSON.parse(withheldRequest(hashed, 'hash') as string)).toEqual({ entry: {}, request: { prompt: '', prompt_sha256: sha } });
    expect(JSON.parse(withheldRequest(hashed, 'none') as string)).toEqual({ entry: {}, request: { prompt: '' } });
  });

  it("PROMPT_RETENTION=none: a gateway's sweep deletes the bytes of a settled generation's input image; its output stays", async () => {
    const first = await startTestGateway();
    try {
      const { key } = await first.createKey();
      const res = await first.api.client(key, {
        prompt: 'the same, kept as nothing',
        model: 'local-1',
        size: '32x32',
        response_format: 'url',
        images: [dataUri(testPng(16, 16))],
      });
      expect(res.status).toBe(200);
      const images = () =>
        first.gateway.database.db.selectFrom('stored_images').select(['role', 'deleted_at']).where('generation_id', '=', res.body.id).orderBy('role').execute();
      expect((await images()).map((image) => [image.role, image.deleted_at])).toEqual([
        ['input', null],
        ['output', null],
      ]);
      // Its sweeper runs once at start, over the same database and image directory.
      const second = await startTestGateway({ DATABASE_URL: first.databaseUrl, IMAGE_DIRECTORY: first.imageDirectory, PROMPT_RETENTION: 'none' });
      await second.close();
      const after = await images();
      expect(after.map((image) => [image.role, image.deleted_at === null])).toEqual([
        ['input', false],
        ['output', true],
      ]);
      const output = new URL(res.body.data[0].url as string);
      expect((await first.api.send('get', output.pathname + output.search)).status).toBe(200);
    } finally {
      await first.close();
    }
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
