import { DEFAULT_CATALOG } from '../../src/config/catalog';
import { recordTaskAccepted } from '../../src/generation/durable.repository';
import type { StoredGenerationRequest } from '../../src/generation/durable';
import { insertGeneration } from '../../src/generation/generations.repository';
import { findKeyById, reserveCredits } from '../../src/keys/keys.repository';
import { VISUAL } from '../../src/providers/jimeng/visual.descriptor';
import { newSortableId } from '../../src/shared/ids';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { generationRow } from '../helpers/generation-rows';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const credentials = { accessKeyId: 'AKtasklife', secretAccessKey: 'task-life-secret' };
const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;
/** The visual API's task life: GetResult answers not_found for a task older than 12 hours ("任务已过期(12小时)"). */
const LIFE_MS = 12 * HOUR_MS;

/**
 * A visual-API task older than its 12-hour life (descriptor `resume.lifeMs`) is not polled forever:
 * a takeover finding one fails the generation instead of polling, and a resumed poll that passes the
 * task's life stops. Either way nothing is charged and the task's image is the operator's loss
 * (`task_expired`, src/generation/charges.ts). The journal is backdated through its repository;
 * time passes on the gateway's test clock, never by sleeping.
 */
describe('accepted upstream tasks past their life (fake visual API)', () => {
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
      // Far beyond the minutes the test clock moves: only the task's life ends these runs.
      PROVIDER_JIMENG_TIMEOUT_MS: String(10 * MINUTE_MS),
    });
  });
  afterAll(async () => {
    await t.close();
    await visual.close();
  });

  const db = () => t.gateway.database.db;
  const polls = (taskId: string) => visual.requests.filter((r) => r.action === 'CVSync2AsyncGetResult' && r.body.task_id === taskId).length;
  const submits = (prompt: string) => visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt).length;
  const creditsUsed = (keyId: string) => t.api.creditsUsed(keyId);
  const generation = (id: string) => db().selectFrom('generations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  /**
   * A jimeng-4.0 generation of a key, its credits reserved, held by a replica that died after the
   * visual API accepted its task `acceptedAgoMs` ago: the row and its journal entry written in one
   * transaction, so a worker takes it over only with its task.
   */
  async function orphanedGeneration(prompt: string, taskId: string, acceptedAgoMs: number): Promise<{ id: string; keyId: string; creditsBefore: number }> {
    const { id: keyId } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100 });
    const creditsBefore = await creditsUsed(keyId);
    const entry = DEFAULT_CATALOG.find((m) => m.model === 'jimeng-4.0')!;
    const stored: StoredGenerationRequest = {
      entry,
      keep_base64: true,
      mark_sends: true,
      request: { prompt, upstreamModel: entry.upstream_model, transport: 'visual', n: 1, width: 1024, height: 1024, responseFormat: 'url' },
    };
    const now = t.clock.now();
    const id = newSortableId('gen', now);
    await db()
      .transaction()
      .execute(async (trx) => {
        const key = (await findKeyById(trx, keyId))!;
        const reservation = (await reserveCredits(trx, { id: keyId, keyHash: key.key_hash }, entry.credits_per_image, now))!;
        expect(Number(reservation.credits_used)).toBe(creditsBefore + entry.credits_per_image);
        await insertGeneration(
          trx,
          generationRow(id, {
            key_id: keyId,
            client_id: null,
            model: entry.model,
            provider: entry.provider,
            credits: entry.credits_per_image,
            usage_epoch: reservation.usage_epoch,
            period_started_at: reservation.period_started_at,
            request: JSON.stringify(stored),
            status: 'running',
            lease_owner: 'replica-that-died',
            lease_expires_at: Date.now() - 1000,
            created_at: now - acceptedAgoMs,
            // Its last run (a takeover of its own, say) started within the deadline: the sweeper leaves it.
            started_at: now,
            runs: 1,
          }),
        );
        await recordTaskAccepted(trx, {
          generation_id: id,
          image_index: 0,
          channel_id: VISUAL.environment!.channelId!,
          task_id: taskId,
          sent_at: now - acceptedAgoMs,
        });
      });
    return { id, keyId, creditsBefore };
  }

  it('a takeover finding a task accepted 12 h + 1 min ago fails the generation without polling it: nothing charged, its image booked as the loss', async () => {
    const prompt = 'accepted long ago';
    const taskId = visual.acceptTask(prompt);
    const { id, keyId, creditsBefore } = await orphanedGeneration(prompt, taskId, LIFE_MS + MINUTE_MS);
    await until(async () => (await generation(id)).status === 'failed', 'the takeover to fail the generation');
    const row = await generation(id);
    expect(Number(row.runs)).toBe(2);
    expect(row.error_code).toBe('provider_error');
    expect(row.error_message).toContain(`task ${taskId} was accepted more than 12 h ago`);
    expect({ images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({ images: 1, reason: 'task_expired' });
    // Neither polled nor submitted again: the takeover does not even go to the channel.
    expect(polls(taskId)).toBe(0);
    expect(submits(prompt)).toBe(0);
    // The dead replica's call is listed, failed, on the channel that accepted it.
    expect(await db().selectFrom('generation_attempts').selectAll().where('generation_id', '=', id).execute()).toEqual([
      expect.objectContaining({ seq: 0, image_index: 0, channel_id: VISUAL.environment!.channelId!, outcome: 'failed', error_code: 'provider_error' }),
    ]);
    expect(await creditsUsed(keyId)).toBe(creditsBefore);
  });

  it('a resumed task still within its life is polled; once its life passes the poll stops, nothing charged, its image booked as the loss', async () => {
    const prompt = 'accepted almost 12 h ago [pending:1000000]';
    const taskId = visual.acceptTask(prompt);
    const { id, keyId, creditsBefore } = await orphanedGeneration(prompt, taskId, LIFE_MS - MINUTE_MS);
    await until(() => polls(taskId) > 0, 'the takeover to poll the task');
    expect((await generation(id)).status).toBe('running');
    t.clock.advanceMs(2 * MINUTE_MS);
    await until(async () => (await generation(id)).status === 'failed', "the poll to stop at the task's life");
    const row = await generation(id);
    expect(row.error_code).toBe('provider_error');
    expect(row.error_message).toContain(`task ${taskId} was accepted more than 12 h ago`);
    expect({ images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({ images: 1, reason: 'task_expired' });
    expect(submits(prompt)).toBe(0);
    expect(await creditsUsed(keyId)).toBe(creditsBefore);
    // The attempt ended: a whole generation through the same account later, the task was not asked again.
    const stopped = polls(taskId);
    const { key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100 });
    expect((await t.api.client(key, { prompt: 'after the expiry', model: 'jimeng-4.0', size: '1024x1024' })).status).toBe(200);
    expect(polls(taskId)).toBe(stopped);
    const attempts = await db().selectFrom('generation_attempts').selectAll().where('generation_id', '=', id).execute();
    expect(attempts).toEqual([expect.objectContaining({ image_index: 0, outcome: 'failed', error_code: 'provider_error' })]);
  });
});
