import { type Books, type BooksGateway, ONE_BACKGROUND_RUN, startBooksGateway } from '../helpers/books';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import type { TestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { sweepOnce } from '../../src/maintenance/sweeper';

/**
 * Issue #17: generations as durable resources. `held-1` (1 credit) runs on the fake Ark API, whose
 * `[hold:TAG]` prompts wait for releaseHeld(TAG), so each state can be observed; one background
 * run at a time (GENERATION_WORKER_CONCURRENCY=1) keeps a second submission queued.
 */
describe('asynchronous generations (Prefer: respond-async; getGeneration, listGenerations, cancelGeneration)', () => {
  let booksGateway: BooksGateway;
  let t: TestGateway;
  let ark: FakeImagesApi;
  let books: Books;

  beforeAll(async () => {
    booksGateway = await startBooksGateway({ ...ONE_BACKGROUND_RUN, MAX_QUEUED_GENERATIONS_PER_KEY: '2' });
    ({ t, ark, books } = booksGateway);
  });
  afterAll(() => booksGateway.close());

  const newKey = async (quota = 10) => (await t.createKey({ credits_quota: quota, allowed_providers: ['local', 'jimeng'] })).key;
  const submit = (key: string, body: Record<string, unknown>, prefer = 'respond-async', path = '/images/generate') =>
    t.api.send('post', path, { body, headers: { Authorization: `Bearer ${key}`, Prefer: prefer } });
  const get = (key: string, path: string) => t.api.send('get', path, { headers: { Authorization: `Bearer ${key}` } });
  const cancel = (key: string, id: string) => t.api.send('post', `/generations/${id}/cancel`, { headers: { Authorization: `Bearer ${key}` } });
  const statusOf = async (key: string, id: string) => (await get(key, `/generations/${id}`)).body.status as string;
  const arkCalls = (tag: string) => ark.requests.filter((r) => String(r.prompt).includes(`[hold:${tag}]`)).length;

  it('respond-async: 202 queued with Location and Preference-Applied, then running, then succeeded with stored images; charged once', async () => {
    const key = await newKey();
    const res = await submit(key, { prompt: 'a [hold:a1]', model: 'held-1', response_format: 'b64_json' });
    expect(res.status).toBe(202);
    expect(res.headers['preference-applied']).toBe('respond-async');
    expect(res.headers.location).toBe(`/generations/${res.body.id}`);
    expect(res.body).toMatchObject({
      object: 'generation',
      status: 'queued',
      model: 'held-1',
      data: null,
      error: null,
      usage: { credits_reserved: 1, credits_charged: 0 },
    });
    await ark.whenHeld('a1');
    expect(await statusOf(key, res.body.id)).toBe('running');
    ark.releaseHeld('a1');
    await until(async () => (await statusOf(key, res.body.id)) === 'succeeded', 'the generation to succeed');
    const done = await get(key, res.headers.location as string);
    expect(done.body).toMatchObject({ status: 'succeeded', error: null, usage: { images: 1, credits_reserved: 0, credits_charged: 1 } });
    expect(done.body.data[0].b64_json).toEqual(expect.any(String));
    expect(done.body.started_at).toEqual(expect.any(String));
    expect(arkCalls('a1')).toBe(1);
    expect(await books.violations({ settled: true })).toEqual([]);
    // A background run marks its upstream call before sending it; the sweeper drops the marks once settled.
    const marks = () => t.gateway.database.db.selectFrom('generation_tasks').select('generation_id').where('generation_id', '=', res.body.id).execute();
    expect(await marks()).toHaveLength(1);
    await sweepOnce({ db: t.gateway.database.db, clock: t.clock, staleAfterMs: { jimeng: 3_600_000 } });
    expect(await marks()).toEqual([]);
  });

  it('another key sees 404 for it and an empty list; the owner lists its own, newest first, with a status filter and cursor', async () => {
    const key = await newKey();
    const first = await submit(key, { prompt: 'x', model: 'local-1', response_format: 'url' });
    const second = await submit(key, { prompt: 'y', model: 'local-1' });
    await until(async () => (await statusOf(key, second.body.id)) === 'succeeded' && (await statusOf(key, first.body.id)) === 'succeeded', 'both to succeed');
    const other = await newKey();
    const hidden = await get(other, `/generations/${first.body.id}`);
    expect(hidden.status).toBe(404);
    expect(hidden.body.error.code).toBe('generation_not_found');
    expect((await cancel(other, first.body.id)).status).toBe(404);
    expect((await get(other, '/generations')).body).toEqual({ data: [], next_cursor: null });
    const page1 = await get(key, '/generations?limit=1&status=succeeded');
    expect(page1.body.data.map((g: { id: string }) => g.id)).toEqual([second.body.id]);
    const page2 = await get(key, `/generations?limit=1&status=succeeded&cursor=${page1.body.next_cursor}`);
    expect(page2.body.data.map((g: { id: string }) => g.id)).toEqual([first.body.id]);
    expect(page2.body.data[0].data[0].url).toMatch(/\/images\/img_/);
    expect((await get(key, '/generations?status=failed')).body.data).toEqual([]);
  });

  it('cancel: a queued one is canceled and released without reaching the upstream; a running one that sent its call keeps its credits; a finished one is 409', async () => {
    const key = await newKey(5);
    const running = await submit(key, { prompt: 'r [hold:c1]', model: 'held-1' });
    await ark.whenHeld('c1');
    // The only background slot is taken: this one waits in the queue.
    const queued = await submit(key, { prompt: 'q [hold:c2]', model: 'held-1' });
    expect(await statusOf(key, queued.body.id)).toBe('queued');
    const canceledQueued = await cancel(key, queued.body.id);
    expect(canceledQueued.status).toBe(200);
    expect(canceledQueued.body).toMatchObject({ status: 'canceled', error: { code: 'canceled' }, usage: { credits_reserved: 0, credits_charged: 0 } });
    const canceledRunning = await cancel(key, running.body.id);
    // Its upstream call was sent (and marked): the upstream bills it, so the key does (issue #29).
    expect(canceledRunning.body).toMatchObject({ status: 'canceled', usage: { credits_reserved: 0, credits_charged: 1 } });
    // The local run was aborted at once: nothing stays held at the fake for it.
    ark.releaseHeld('c1');
    const again = await cancel(key, running.body.id);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('generation_finished');
    expect(arkCalls('c2')).toBe(0);
    expect(await books.violations({ settled: true })).toEqual([]);
  });

  it('a per-key cap on queued generations: 429 too_many_queued_generations with Retry-After, nothing reserved', async () => {
    const key = await newKey(10);
    const holder = await submit(key, { prompt: 'h [hold:q0]', model: 'held-1' });
    await ark.whenHeld('q0');
    expect((await submit(key, { prompt: 'q [hold:q1]', model: 'held-1' })).status).toBe(202);
    expect((await submit(key, { prompt: 'q [hold:q2]', model: 'held-1' })).status).toBe(202);
    const refused = await submit(key, { prompt: 'q [hold:q3]', model: 'held-1' });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('too_many_queued_generations');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // One background run at a time: each queued one reaches the upstream after the previous ended.
    for (const tag of ['q0', 'q1', 'q2']) {
      await ark.whenHeld(tag);
      ark.releaseHeld(tag);
    }
    await until(async () => (await get(key, '/generations?status=succeeded')).body.data.length === 3, 'the three to succeed');
    expect(holder.status).toBe(202);
    expect(await books.violations({ settled: true })).toEqual([]);
  });

  it("quota is refused at submission with today's code", async () => {
    const key = await newKey(1);
    expect((await submit(key, { prompt: 'one', model: 'local-1' })).status).toBe(202);
    const refused = await submit(key, { prompt: 'two', model: 'local-1' });
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe('quota_exceeded');
  });

  it('a synchronous b64_json generation, read back: its images count as delivered though they were not stored', async () => {
    const key = await newKey();
    const res = await submit(key, { prompt: 'inline', model: 'local-1', response_format: 'b64_json' }, '');
    expect([res.status, res.body.usage?.images]).toEqual([200, 1]);
    const listed = await get(key, '/generations');
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0]).toMatchObject({ status: 'succeeded', usage: { images: 1, credits_reserved: 0, credits_charged: 1 } });
  });

  it('wait=N: 200 with the result when done in time (both APIs), else 202 with the queued or running resource', async () => {
    const key = await newKey();
    const fast = await submit(key, { prompt: 'quick', model: 'local-1', response_format: 'b64_json' }, 'wait=10');
    expect(fast.status).toBe(200);
    expect(fast.body).toMatchObject({ model: 'local-1', usage: { images: 1, credits_charged: 1 } });
    expect(fast.body.data[0].b64_json).toEqual(expect.any(String));
    // The wait was honoured: said so on the 200 too (issue #29 §8).
    expect(fast.headers['preference-applied']).toBe('wait=10');
    const openai = await submit(key, { prompt: 'quick', model: 'local-1', response_format: 'b64_json' }, 'respond-async, wait=10', '/v1/images/generations');
    expect(openai.status).toBe(200);
    expect(openai.headers['preference-applied']).toBe('wait=10');
    expect(openai.body.data[0]).toMatchObject({ b64_json: expect.any(String), revised_prompt: 'quick' });
    const slow = await submit(key, { prompt: 's [hold:w1]', model: 'held-1' }, 'respond-async, wait=1');
    expect(slow.status).toBe(202);
    expect(slow.headers['preference-applied']).toBe('respond-async, wait=1');
    expect(['queued', 'running']).toContain(slow.body.status);
    const openaiAsync = await submit(key, { prompt: 'later', model: 'local-1' }, 'respond-async', '/v1/images/generations');
    expect(openaiAsync.status).toBe(202);
    ark.releaseHeld('w1');
    await until(async () => (await statusOf(key, slow.body.id)) === 'succeeded', 'the held one to succeed');
  });

  it('without Prefer the request stays synchronous and is listed as a generation too', async () => {
    const key = await newKey();
    const res = await t.api.client(key, { prompt: 'sync', model: 'local-1', response_format: 'b64_json' });
    expect(res.status).toBe(200);
    const listed = await get(key, '/generations');
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0]).toMatchObject({ id: res.body.id, status: 'succeeded', usage: { credits_charged: 1 } });
  });

  it('canceling a synchronous generation while its client waits: the client gets 409 generation_finished and no image; its sent call is charged', async () => {
    const key = await newKey(3);
    const waiting = t.api.client(key, { prompt: 's [hold:sc]', model: 'held-1' });
    await ark.whenHeld('sc');
    const running = await get(key, '/generations?status=running');
    expect(running.body.data).toHaveLength(1);
    expect((await cancel(key, running.body.data[0].id)).body).toMatchObject({ status: 'canceled', usage: { credits_charged: 1 } });
    const answer = await waiting;
    expect(answer.status).toBe(409);
    expect(answer.body.error.code).toBe('generation_finished');
    expect(answer.body.error.message).toContain('1 credits were charged');
    ark.releaseHeld('sc');
    expect(await books.violations({ settled: true })).toEqual([]);
  });

  it('needs a key', async () => {
    expect((await t.api.send('get', '/generations')).status).toBe(401);
    expect((await t.api.send('get', '/generations/gen_abc')).status).toBe(401);
    expect((await t.api.send('post', '/generations/gen_abc/cancel')).status).toBe(401);
  });
});
