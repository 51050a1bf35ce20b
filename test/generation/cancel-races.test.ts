import type { FakeImagesApi } from '../fakes/fake-images-api';
import { BOOKS_CATALOG, type Books, type BooksGateway, startBooksGateway } from '../helpers/books';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * A cancel of a running synchronous generation committed on another replica, which the run's own
 * process hears of only at its next lease renewal (every third of GENERATION_LEASE_MS, 10 s here):
 * no upstream call starts once the cancel committed (the run reads its row before each call), and
 * the waiting client is told what the books say, 409 `generation_finished`, even when the run then
 * fails on its own. `held-1` runs on the fake Ark API, one call at a time on this replica.
 */
describe('cancel of a running synchronous generation, committed on another replica', () => {
  let booksGateway: BooksGateway;
  let t: TestGateway;
  let ark: FakeImagesApi;
  let books: Books;
  /** A second gateway on the same database: where the cancels are sent. */
  let other: TestGateway;

  beforeAll(async () => {
    booksGateway = await startBooksGateway({
      PROVIDER_JIMENG_MAX_CONCURRENCY: '1',
      // A busy answer's backoff (1-3 s, jitter) outlasts the cancel's round trip.
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '2000',
      CHANNEL_QUEUE_TIMEOUT_MS: '60000',
    });
    ({ t, ark, books } = booksGateway);
    other = await startTestGateway({
      DATABASE_URL: t.databaseUrl,
      MODEL_CATALOG: JSON.stringify(BOOKS_CATALOG),
      ARK_API_KEY: 'ark-books',
      ARK_BASE_URL: ark.url,
    });
  });
  afterAll(async () => {
    await other?.close();
    await booksGateway?.close();
  });

  const newKey = async () => t.createKey({ credits_quota: 10, allowed_providers: ['jimeng'] });
  const as = (key: string) => ({ Authorization: `Bearer ${key}` });
  const calls = (prompt: string) => ark.requests.filter((r) => r.prompt === prompt).length;
  /** The id of the key's running generation of `prompt`, as the key holder lists it. */
  const runningId = async (key: string, prompt: string): Promise<string> => {
    let id: string | undefined;
    await until(async () => {
      const listed = await t.api.send('get', '/generations?status=running', { headers: as(key) });
      id = (listed.body.data as Array<{ id: string; prompt: string }>).find((g) => g.prompt === prompt)?.id;
      return id !== undefined;
    }, `the generation of "${prompt}" to run`);
    return id!;
  };
  const cancelElsewhere = (key: string, id: string) => other.api.send('post', `/generations/${id}/cancel`, { headers: as(key) });
  const charged = async (key: string, id: string) => (await t.api.send('get', `/generations/${id}`, { headers: as(key) })).body.usage.credits_charged as number;

  it('while the run waits for its channel: the call is never sent, the client gets 409, nothing is charged', async () => {
    const { id: keyId, key } = await newKey();
    const occupant = await booksGateway.startHeld(key, { tag: 'occupant' });
    const prompt = 'waits for the one channel slot';
    const waiting = t.api.client(key, { prompt, model: 'held-1' });
    const id = await runningId(key, prompt);
    const canceled = await cancelElsewhere(key, id);
    expect(canceled.status).toBe(200);
    expect(canceled.body).toMatchObject({ status: 'canceled', usage: { credits_charged: 1 } });

    expect((await occupant.finish()).status).toBe(200);
    const answer = await waiting;
    expect(answer.status).toBe(409);
    expect(answer.body.error.code).toBe('generation_finished');
    expect(answer.body.error.message).toContain('nothing was charged');
    expect(calls(prompt)).toBe(0);
    expect(await charged(key, id)).toBe(0);
    // The occupant's image alone.
    expect(await t.api.creditsUsed(keyId)).toBe(1);
    expect(await books.violations({ settled: true })).toEqual([]);
  });

  it('while the run waits to retry after a 429: no further call reaches the upstream, the client gets 409, nothing is charged', async () => {
    const { key } = await newKey();
    const prompt = 'busy once [busy:1]';
    const waiting = t.api.client(key, { prompt, model: 'held-1' });
    await until(() => calls(prompt) === 1, 'the first call to be answered 429');
    const id = await runningId(key, prompt);
    expect((await cancelElsewhere(key, id)).body).toMatchObject({ status: 'canceled' });

    const answer = await waiting;
    expect(answer.status).toBe(409);
    expect(answer.body.error.code).toBe('generation_finished');
    expect(answer.body.error.message).toContain('nothing was charged');
    expect(calls(prompt)).toBe(1);
    expect(await charged(key, id)).toBe(0);
    expect(await books.violations({ settled: true })).toEqual([]);
  });

  it('the run fails after the cancel committed: the client gets 409 generation_finished with the charge the books keep', async () => {
    const { id: keyId, key } = await newKey();
    // A gateway timeout: the upstream may have made the image, so the cancel's charge of the sent call stands.
    const prompt = 'fails after the cancel [hold:late-failure] [error:GatewayTimeout:504]';
    const waiting = t.api.client(key, { prompt, model: 'held-1' });
    await ark.whenHeld('late-failure');
    const id = await runningId(key, prompt);
    expect((await cancelElsewhere(key, id)).body).toMatchObject({ status: 'canceled', usage: { credits_charged: 1 } });
    ark.releaseHeld('late-failure');

    const answer = await waiting;
    expect(answer.status).toBe(409);
    expect(answer.body.error.code).toBe('generation_finished');
    expect(answer.body.error.message).toContain('1 credits were charged');
    expect(await charged(key, id)).toBe(1);
    expect(await t.api.creditsUsed(keyId)).toBe(1);
    expect(calls(prompt)).toBe(1);
    expect(await books.violations({ settled: true })).toEqual([]);
  });
});
