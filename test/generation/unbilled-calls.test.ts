import { sql } from 'kysely';
import { Client } from 'pg';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { Books } from '../helpers/books';
import { testEngine } from '../helpers/test-database';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Every upstream call the upstream may bill is charged to a key or booked as the operator's loss
 * (docs/clients/async-generations.md, "What cancel, disconnect and partial failure cost"): a 200
 * whose body is not a valid answer, and images made just before a database outage failed the
 * request. `flux-dev` runs on a fake OpenAI-compatible upstream (no `usage` in its answers).
 */
describe('upstream calls that no key pays for are booked as the operator’s loss', () => {
  let upstream: FakeImagesApi;
  let t: TestGateway;

  beforeAll(async () => {
    upstream = await startFakeImagesApi({ apiKey: 'sk-unbilled', flavour: 'openai' });
    t = await startTestGateway({
      OPENAI_COMPAT_BASE_URL: `${upstream.url}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-unbilled',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      MODEL_CATALOG: JSON.stringify([
        { model: 'flux-dev', provider: 'selfhosted', upstream_model: 'black-forest-labs/flux-dev', credits_per_image: 2, default_size: '1024x1024' },
      ]),
      PROVIDER_SELFHOSTED_RETRY_BASE_DELAY_MS: '5',
      // A short statement deadline: the PostgreSQL outage below is a lock held past it.
      DB_STATEMENT_TIMEOUT_MS: '1000',
    });
  });
  afterAll(async () => {
    upstream?.releaseHeld();
    await t?.close();
    await upstream?.close();
  });

  const db = () => t.gateway.database.db;
  /** The one generation of a key. */
  const generationOf = (keyId: string) => db().selectFrom('generations').selectAll().where('key_id', '=', keyId).executeTakeFirstOrThrow();
  const newKey = () => t.createKey({ allowed_providers: ['selfhosted'], credits_quota: 100 });

  it('a 200 whose body has no images: 502, nothing charged, the images asked for booked (no_usable_answer), the call listed in attempts', async () => {
    const { id: keyId, key } = await newKey();
    const prompt = 'answered without images [empty]';
    const res = await t.api.client(key, { prompt, model: 'flux-dev', n: 2 });
    expect([res.status, res.body.error.code]).toEqual([502, 'provider_error']);
    expect(upstream.requests.filter((r) => r.prompt === prompt)).toHaveLength(1);
    expect(await t.api.creditsUsed(keyId)).toBe(0);

    const row = await generationOf(keyId);
    expect({ status: row.status, images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({
      status: 'failed',
      images: 2,
      reason: 'no_usable_answer',
    });
    const internal = await t.internal.service('get', `/api/v1/creative/generations/${row.id}`);
    expect(internal.status).toBe(200);
    expect(internal.body.attempts).toEqual([expect.objectContaining({ image_index: 0, outcome: 'failed', error_code: 'provider_error' })]);
  });

  it('images made just before a database outage failed the request: 503, nothing charged, the images booked (not_stored) once the release lands', async () => {
    const { id: keyId, key } = await newKey();
    const prompt = 'made before the outage [hold:outage]';
    const answer = t.api.client(key, { prompt, model: 'flux-dev' });
    await upstream.whenHeld('outage');
    const outage = await startOutage(t);
    try {
      upstream.releaseHeld('outage');
      const failed = await answer;
      expect(failed.status).toBe(503);
      expect(['dependency_unavailable', 'image_storage_unavailable']).toContain(failed.body.error.code);
    } finally {
      await outage.end();
    }
    await until(async () => (await generationOf(keyId)).status === 'failed', 'the release once the database takes writes', 20_000);
    const row = await generationOf(keyId);
    expect({ images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({ images: 1, reason: 'not_stored' });
    expect(await t.api.creditsUsed(keyId)).toBe(0);
    // The image the upstream made is paid by no key, and listed.
    expect(await new Books(db()).unpaidImages(upstream.made.filter((made) => made === prompt))).toEqual([]);
  });
});

/** On SQLite the file refuses writes; on PostgreSQL the tables a settlement writes are locked past the statement deadline. */
async function startOutage(t: TestGateway): Promise<{ end(): Promise<void> }> {
  if (testEngine === 'sqlite') {
    const pragma = (text: string) => sql.raw(text).execute(t.gateway.database.db);
    await pragma('PRAGMA query_only = 1');
    return { end: () => pragma('PRAGMA query_only = 0').then(() => undefined) };
  }
  const locker = new Client({ connectionString: t.databaseUrl });
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE generations, stored_images, generation_attempts IN ACCESS EXCLUSIVE MODE');
  return {
    async end() {
      await locker.query('COMMIT');
      await locker.end();
    },
  };
}
