import type { FakeVisual } from '../fakes/fake-volc-visual';
import type { GatewayProcess } from '../helpers/gateway-process';
import type { GatewayDatabase } from '../../src/db/database';
import { Books } from '../helpers/books';
import { describeWithServices } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { startVisualReplicas, type VisualReplicas } from '../helpers/visual-replicas';

const CREDITS_PER_IMAGE = 3; // jimeng-4.0
const QUOTA_IMAGES = 8;

/**
 * Issue #29 §1-§2 as the red team measured it: a mixed load on 3 replicas (synchronous requests,
 * cancels sent to another replica than the one running the generation, clients that disconnect,
 * asynchronous jobs canceled while they run). Afterwards no key has been served more images than its
 * quota, every image served was charged, and every upstream call is charged to a key or listed as the
 * operator's loss. Before the fix, cancels through another replica served images for free.
 */
describeWithServices('the money invariant under a mixed load (3 replicas on PostgreSQL + Redis)', () => {
  let setup: VisualReplicas;
  let visual: FakeVisual;
  let observer: GatewayDatabase;
  let replicas: GatewayProcess[];

  beforeAll(async () => {
    setup = await startVisualReplicas(3, { GENERATION_LEASE_MS: '30000', GENERATION_POLL_MS: '100' });
    ({ visual, observer, replicas } = setup);
  }, 120_000);
  afterAll(() => setup?.close());

  it('no image leaves uncharged, no key gets more than its quota, every upstream call is paid or listed', async () => {
    const keys = await Promise.all(
      [0, 1, 2].map((i) =>
        createKeyVia(new ApiClient(replicas[i]!.url), { credits_quota: QUOTA_IMAGES * CREDITS_PER_IMAGE, rate_limit_rpm: 1000, allowed_providers: ['jimeng'] }),
      ),
    );
    const served = new Map<string, number>();
    const auth = (key: string) => ({ Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' });
    /** Cancels the generation of `prompt` through another replica once it runs; gives up when `settled` says its request was answered. */
    const cancelElsewhere = async (key: string, prompt: string, replica: number, settled: () => boolean) => {
      const other = replicas[(replica + 1) % replicas.length]!.url;
      while (!settled()) {
        const row = await observer.db.selectFrom('generations').select(['id', 'status']).where('request', 'like', `%${prompt}%`).executeTakeFirst();
        if (row?.status === 'running') {
          await fetch(`${other}/generations/${row.id}/cancel`, { method: 'POST', headers: auth(key) });
          return;
        }
        if (row && row.status !== 'queued') return;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    };
    const one = async (k: number, i: number) => {
      const { key, id } = keys[k]!;
      const replica = (k + i) % replicas.length;
      const url = replicas[replica]!.url;
      const prompt = `money k${k} r${i} [pending:${10 + ((i * 7) % 30)}]`;
      const kind = i % 4; // 0: plain, 1: canceled elsewhere, 2: client disconnects, 3: async, canceled elsewhere
      const body = JSON.stringify({ prompt, model: 'jimeng-4.0', response_format: 'url' });
      if (kind === 3) {
        const submitted = await fetch(`${url}/images/generate`, { method: 'POST', headers: { ...auth(key), Prefer: 'respond-async' }, body });
        if (submitted.status === 202) await cancelElsewhere(key, prompt, replica, () => false);
        return;
      }
      const aborter = new AbortController();
      let answered = false;
      const answer = fetch(`${url}/images/generate`, { method: 'POST', headers: auth(key), body, signal: aborter.signal })
        .then(
          async (res) => ({ status: res.status, body: (await res.json()) as { data?: unknown[] } }),
          () => ({ status: 0, body: {} as { data?: unknown[] } }),
        )
        .finally(() => {
          answered = true;
        });
      if (kind === 1) await cancelElsewhere(key, prompt, replica, () => answered);
      if (kind === 2) {
        await new Promise((resolve) => setTimeout(resolve, 150));
        aborter.abort();
      }
      const res = await answer;
      if (res.status === 200) served.set(id, (served.get(id) ?? 0) + (res.body.data?.length ?? 0));
    };
    // 3 keys x 24 requests, 6 at a time per key.
    await Promise.all(
      [0, 1, 2].map(async (k) => {
        for (let batch = 0; batch < 4; batch += 1) await Promise.all(Array.from({ length: 6 }, (_, j) => one(k, batch * 6 + j)));
      }),
    );
    // Everything settled, runs that finished after their cancel included.
    await until(
      async () => (await observer.db.selectFrom('generations').select('id').where('status', 'in', ['queued', 'running']).execute()).length === 0,
      'every generation to settle',
      30_000,
    );

    const books = new Books(observer.db);
    expect(await books.violations({ settled: true })).toEqual([]);
    const submits = visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').map((r) => String(r.body.prompt));
    expect(await books.unpaidImages(submits)).toEqual([]);
    let imagesServed = 0;
    let creditsCharged = 0;
    for (const { id } of keys) {
      const creditsUsed = await new ApiClient(replicas[0]!.url).creditsUsed(id);
      const images = served.get(id) ?? 0;
      imagesServed += images;
      creditsCharged += creditsUsed;
      expect(images).toBeLessThanOrEqual(QUOTA_IMAGES);
      expect(images * CREDITS_PER_IMAGE).toBeLessThanOrEqual(creditsUsed);
    }
    const unbilled = await observer.db
      .selectFrom('generations')
      .select((eb) => eb.fn.sum<number>('unbilled_images').as('images'))
      .executeTakeFirstOrThrow();
    console.log(
      `money invariant: ${imagesServed} images served for ${creditsCharged} credits (${creditsCharged / CREDITS_PER_IMAGE} images' worth); ` +
        `${submits.length} upstream calls = ${creditsCharged / CREDITS_PER_IMAGE} charged + ${Number(unbilled.images ?? 0)} listed as the operator's loss`,
    );
    // Per generation: what its key paid plus what is listed as a loss is exactly what the upstream was sent.
    const rows = await observer.db.selectFrom('generations').select(['status', 'images', 'credits', 'charged_credits', 'unbilled_images', 'request']).execute();
    const mismatches = rows.flatMap((row) => {
      const prompt = (JSON.parse(row.request!) as { request: { prompt: string } }).request.prompt;
      const calls = submits.filter((p) => p === prompt).length;
      const paid = (row.status === 'succeeded' ? Number(row.images) : Number(row.charged_credits) / CREDITS_PER_IMAGE) + Number(row.unbilled_images);
      return paid === calls ? [] : [`${prompt} (${row.status}): ${calls} calls sent, ${paid} images paid or listed`];
    });
    expect(mismatches).toEqual([]);
    expect(submits.length).toBe(creditsCharged / CREDITS_PER_IMAGE + Number(unbilled.images ?? 0));
    // Issue #28: the usage rollups, written with each settlement on whichever replica, hold exactly the books.
    const used = new Map((await observer.db.selectFrom('api_keys').select(['id', 'credits_used']).execute()).map((k) => [k.id, Number(k.credits_used)]));
    for (const table of ['usage_rollups', 'usage_key_days'] as const) {
      const sums = await observer.db
        .selectFrom(table)
        .select((eb) => ['key_id', eb.fn.sum<number>('credits').as('credits')])
        .groupBy('key_id')
        .execute();
      expect(new Map(sums.map((row) => [row.key_id, Number(row.credits)]))).toEqual(new Map(keys.map(({ id }) => [id, used.get(id)])));
    }
    const totals = await observer.db
      .selectFrom('usage_rollup_totals')
      .select((eb) => [eb.fn.sum<number>('credits').as('credits'), eb.fn.sum<number>('requests').as('requests')])
      .executeTakeFirstOrThrow();
    expect([Number(totals.credits), Number(totals.requests)]).toEqual([creditsCharged, rows.length]);
  }, 120_000);
});
