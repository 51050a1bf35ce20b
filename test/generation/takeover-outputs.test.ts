import { createHash } from 'node:crypto';
import { DEFAULT_CATALOG } from '../../src/config/catalog';
import type { StoredImagesTable } from '../../src/db/schema';
import { recordTaskAccepted } from '../../src/generation/durable.repository';
import type { StoredGenerationRequest } from '../../src/generation/durable';
import { insertGeneration } from '../../src/generation/generations.repository';
import { insertStoredImages } from '../../src/images/images.repository';
import { findKeyById, reserveCredits } from '../../src/keys/keys.repository';
import { VISUAL } from '../../src/providers/jimeng/visual.descriptor';
import { newSortableId } from '../../src/shared/ids';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { generationRow } from '../helpers/generation-rows';
import { testPng } from '../helpers/test-images';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const credentials = { accessKeyId: 'AKtakeoveroutputs', secretAccessKey: 'takeover-outputs-secret' };
const DAY_MS = 86_400_000;

/**
 * A replica that dies while storing a generation's images, before its settlement: the replica that
 * takes the generation over polls the accepted tasks again and stores the images anew. The answer
 * is the survivor's images alone (exactly `n`, each URL working), the dead run's rows withdrawn.
 * The dead run is written through the repositories (row, task journal, stored image rows), as its
 * process would have left them; no process is killed.
 */
describe('a takeover of a run that died while storing its images (fake visual API)', () => {
  let visual: FakeVisual;
  let t: TestGateway;

  beforeAll(async () => {
    visual = await startFakeVisual(credentials);
    t = await startTestGateway({
      VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
      VOLC_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      VOLC_VISUAL_ENDPOINT: visual.url,
      VOLC_POLL_INTERVAL_MS: '20',
      GENERATION_POLL_MS: '50',
    });
  });
  afterAll(async () => {
    await t?.close();
    await visual?.close();
  });

  const db = () => t.gateway.database.db;
  const generation = (id: string) => db().selectFrom('generations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  /** GET of a gateway image URL: its status. */
  const fetchStatus = async (url: string) => (await t.api.send('get', new URL(url).pathname + new URL(url).search)).status;

  it('the answer lists the survivor’s n images, every URL works; the dead run’s images answer 410; charged once', async () => {
    const { id: keyId, key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100 });
    const entry = DEFAULT_CATALOG.find((m) => m.model === 'jimeng-4.0')!;
    const n = 2;
    const prompt = 'stored then died';
    const stored: StoredGenerationRequest = {
      entry,
      keep_base64: true,
      mark_sends: true,
      request: { prompt, upstreamModel: entry.upstream_model, transport: 'visual', n, width: 1024, height: 1024, responseFormat: 'url' },
    };
    const creditsBefore = await t.api.creditsUsed(keyId);
    const now = t.clock.now();
    const id = newSortableId('gen', now);
    const png = testPng(1024, 1024);
    // Position 0 reached the store before the process died, position 1 did not (its row goes first).
    const deadRows: StoredImagesTable[] = [0, 1].map((position) => ({
      id: newSortableId('img', now),
      generation_id: id,
      position,
      role: 'output',
      key_id: keyId,
      client_id: null,
      content_type: 'image/png',
      byte_size: png.length,
      sha256: createHash('sha256').update(png).digest('hex'),
      width: 1024,
      height: 1024,
      created_at: now,
      expires_at: now + DAY_MS,
      deleted_at: null,
    }));
    await db()
      .transaction()
      .execute(async (trx) => {
        const found = (await findKeyById(trx, keyId))!;
        const reservation = (await reserveCredits(trx, { id: keyId, keyHash: found.key_hash }, n * entry.credits_per_image, now))!;
        await insertGeneration(
          trx,
          generationRow(id, {
            key_id: keyId,
            client_id: null,
            model: entry.model,
            provider: entry.provider,
            images: n,
            credits: n * entry.credits_per_image,
            usage_epoch: reservation.usage_epoch,
            period_started_at: reservation.period_started_at,
            request: JSON.stringify(stored),
            status: 'running',
            lease_owner: 'replica-that-died',
            // Lapsed only once the dead run's images are in: the worker takes it over after this transaction.
            lease_expires_at: Date.now() - 1000,
            created_at: now,
            started_at: now,
            runs: 1,
          }),
        );
        for (const index of [0, 1]) {
          await recordTaskAccepted(trx, {
            generation_id: id,
            image_index: index,
            channel_id: VISUAL.environment!.channelId!,
            task_id: visual.acceptTask(prompt),
            sent_at: now,
          });
        }
        await insertStoredImages(trx, deadRows);
      });
    await t.gateway.images.store.put(deadRows[0]!.id, png, 'image/png');

    await until(async () => (await generation(id)).status === 'succeeded', 'the takeover to deliver the generation');
    const answer = await t.api.send('get', `/generations/${id}`, { headers: { Authorization: `Bearer ${key}` } });
    expect(answer.status).toBe(200);
    const data = answer.body.data as Array<{ url: string }>;
    expect(data).toHaveLength(n);
    for (const image of data) expect(await fetchStatus(image.url)).toBe(200);
    const listedIds = data.map((image) => /\/images\/([^/?]+)/.exec(image.url)![1]);
    expect(listedIds.some((imageId) => deadRows.some((row) => row.id === imageId))).toBe(false);
    for (const row of deadRows) expect(await fetchStatus(t.gateway.images.signedUrl({ id: row.id, expires_at: now + DAY_MS }))).toBe(410);
    expect(answer.body.usage).toMatchObject({ images: n, credits_charged: n * entry.credits_per_image });
    expect(await t.api.creditsUsed(keyId)).toBe(creditsBefore + n * entry.credits_per_image);
    // The tasks were polled, never submitted again.
    expect(visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt)).toHaveLength(0);
  });

  it('a takeover that may not resend what its predecessor sent: every call of the dead run listed in attempts and its images booked; nothing charged', async () => {
    const { id: keyId } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100 });
    const entry = DEFAULT_CATALOG.find((m) => m.model === 'jimeng-4.0')!;
    const prompt = 'sent then died';
    const stored: StoredGenerationRequest = {
      entry,
      keep_base64: true,
      mark_sends: true,
      request: { prompt, upstreamModel: entry.upstream_model, transport: 'visual', n: 2, width: 1024, height: 1024, responseFormat: 'url' },
    };
    const creditsBefore = await t.api.creditsUsed(keyId);
    const now = t.clock.now();
    const id = newSortableId('gen', now);
    const channelId = VISUAL.environment!.channelId!;
    await db()
      .transaction()
      .execute(async (trx) => {
        const found = (await findKeyById(trx, keyId))!;
        const reservation = (await reserveCredits(trx, { id: keyId, keyHash: found.key_hash }, 2 * entry.credits_per_image, now))!;
        await insertGeneration(
          trx,
          generationRow(id, {
            key_id: keyId,
            client_id: null,
            model: entry.model,
            provider: entry.provider,
            images: 2,
            credits: 2 * entry.credits_per_image,
            usage_epoch: reservation.usage_epoch,
            period_started_at: reservation.period_started_at,
            request: JSON.stringify(stored),
            status: 'running',
            lease_owner: 'replica-that-died',
            lease_expires_at: Date.now() - 1000,
            created_at: now,
            started_at: now,
            runs: 1,
          }),
        );
        // Image 0's submit was sent and never answered; image 1's task was accepted.
        await trx.insertInto('generation_tasks').values({ generation_id: id, image_index: 0, channel_id: channelId, task_id: null, sent_at: now }).execute();
        await recordTaskAccepted(trx, { generation_id: id, image_index: 1, channel_id: channelId, task_id: visual.acceptTask(prompt), sent_at: now });
      });

    await until(async () => (await generation(id)).status === 'failed', 'the takeover to fail the generation');
    const row = await generation(id);
    expect(row.error_code).toBe('abandoned');
    expect({ images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({ images: 2, reason: 'abandoned' });
    expect(await t.api.creditsUsed(keyId)).toBe(creditsBefore);
    const internal = await t.internal.service('get', `/api/v1/creative/generations/${id}`);
    expect(internal.status).toBe(200);
    expect(internal.body.attempts).toEqual([
      expect.objectContaining({ image_index: 0, channel_id: channelId, outcome: 'failed', error_code: 'abandoned' }),
      expect.objectContaining({ image_index: 1, channel_id: channelId, outcome: 'failed', error_code: 'abandoned' }),
    ]);
    expect(visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt)).toHaveLength(0);
  });
});
