import Redis from 'ioredis';
import { Client } from 'pg';
import type { Response } from 'supertest';
import { testEngine } from '../helpers/test-database';
import { localRequest, startTestGateway, type TestGateway } from '../helpers/test-gateway';

/**
 * The PostgreSQL and Redis round trips one synchronous generation costs on the production path
 * (PostgreSQL + Redis, as replicas run): `POST /images/generate` with a client key, the `local`
 * provider, a warm key cache. The numbers asserted are the measured ones, each round trip named;
 * the capacity section of docs/operators/replicas.md quotes them. A change that adds one fails here;
 * one that removes one lowers the number here and there.
 *
 * How they are counted, in this process, without touching the gateway's code:
 * - PostgreSQL: every `query` of pg's Client (kysely's PostgresDialect and every pool connection go
 *   through it) is one round trip: BEGIN and COMMIT count, as they cost one each.
 * - Redis: every command ioredis sends (`sendCommand`), except that the commands of one pipeline
 *   (or MULTI) count once, as they go out in one write; a Lua script is one command.
 * - Only what the requests cause: the requests are sequential (the statement batcher then sends each
 *   statement alone, the most one generation costs; under concurrency they share statements), and
 *   the background work that could fall into their window is set off by configuration: the worker's
 *   and the webhook dispatcher's polls and the key-expiry scan every 10 minutes or more, channel probes
 *   off (their default), the sweeper every 60 s (it runs once at start, before anything is counted).
 *   Generation and `max_concurrent` leases are renewed every third of their lease (10 s) only while a
 *   generation runs, so never during these few-millisecond runs. A window as long as the measured ones,
 *   with no request, must see no round trip at all, or the counts would include someone else's.
 * - Two reads are per replica and time, not per generation, and are left out of the counts: the
 *   channel list (re-read at most once a second, by the first request after that: channel-directory.ts)
 *   and a key's row (cached for 60 s: key-cache.ts; the warm-up requests fill the cache). The first is
 *   checked to happen at most once a second.
 */

type RoundTrip = { to: 'postgres' | 'redis'; what: string };

/** The channel list's periodic re-read (src/channels/channel-directory.ts, at most once a second per replica). */
const isChannelListRead = (trip: RoundTrip) => trip.to === 'postgres' && /^select \* from "channels"/i.test(trip.what);

/** A round trip as a line of a failure message: the statement's start, the command and its key (prefix dropped). */
function label(trip: RoundTrip): string {
  return `${trip.to}: ${trip.what
    .replace(/\s+/g, ' ')
    .replace(/cgw-test:\w+:/g, '')
    .slice(0, 90)}`;
}

/** Counts every round trip to PostgreSQL and Redis this process makes, from now until `restore`. */
function countRoundTrips(): { trips: RoundTrip[]; restore(): void } {
  const trips: RoundTrip[] = [];
  const query = Client.prototype.query;
  Client.prototype.query = function (this: Client, ...args: unknown[]) {
    const config = args[0] as string | { text: string };
    trips.push({ to: 'postgres', what: typeof config === 'string' ? config : config.text });
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;

  const send = Redis.prototype.sendCommand;
  // A pipeline hands each of its commands to sendCommand with the same stream object, then writes them at once.
  const pipelines = new WeakMap<object, RoundTrip>();
  Redis.prototype.sendCommand = function (this: Redis, command, stream, ...rest) {
    const { name, args } = command as unknown as { name: string; args: unknown[] };
    const what = `${name} ${scriptName(this, name, args)}${String(name === 'evalsha' || name === 'eval' ? (args[2] ?? '') : (args[0] ?? ''))}`;
    const pipeline = (stream as { isPipeline?: boolean } | undefined)?.isPipeline ? (stream as object) : undefined;
    const trip = pipeline && pipelines.get(pipeline);
    if (trip) trip.what += `; ${what}`;
    else {
      const first: RoundTrip = { to: 'redis', what: pipeline ? `pipeline: ${what}` : what };
      trips.push(first);
      if (pipeline) pipelines.set(pipeline, first);
    }
    return send.call(this, command, stream, ...(rest as []));
  } as typeof send;

  return {
    trips,
    restore() {
      Client.prototype.query = query;
      Redis.prototype.sendCommand = send;
    },
  };
}

/** The name a script was defined under (redis.defineCommand), for a readable failure message. */
function scriptName(redis: Redis, name: string, args: unknown[]): string {
  if (name !== 'evalsha' && name !== 'eval') return '';
  const scripts = (redis as unknown as { scriptsSet: Record<string, { sha: string; lua: string }> }).scriptsSet;
  const found = Object.entries(scripts).find(([, script]) => script.sha === args[0] || script.lua === args[0]);
  return `${found?.[0] ?? '(script)'} `;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

(testEngine === 'postgres' ? describe : describe.skip)('round trips per synchronous generation on PostgreSQL + Redis', () => {
  let gw: TestGateway;
  let counter: ReturnType<typeof countRoundTrips>;

  beforeAll(async () => {
    // Before the gateway starts: its Redis client binds sendCommand when it is made (redis-client.ts).
    counter = countRoundTrips();
    gw = await startTestGateway({
      GENERATION_POLL_MS: '600000',
      WEBHOOK_POLL_INTERVAL_MS: '600000',
      WEBHOOK_EXPIRY_SCAN_INTERVAL_MS: '86400000',
    });
  });
  afterAll(async () => {
    await gw?.close();
    counter?.restore();
  });

  const GENERATIONS = 5;

  /**
   * Sends a few warm-up requests, then GENERATIONS measured ones, one after the other; answers the
   * round trips of each measured generation, which must be the same for all of them.
   */
  async function measure(send: (i: number) => Promise<Response>): Promise<{ postgres: number; redis: number; trips: string[] }> {
    // Warm: the key's row in the key cache, each Lua script loaded on the connection, the channel list read.
    for (let i = 0; i < 3; i++) expect((await send(-1 - i)).status).toBe(200);
    await sleep(50);
    const { trips } = counter;
    const windows: RoundTrip[][] = [];
    const started = Date.now();
    for (let i = 0; i < GENERATIONS; i++) {
      const from = trips.length;
      expect((await send(i)).status).toBe(200);
      // Whatever the request does after its answer lands in its own window.
      await sleep(20);
      windows.push(trips.slice(from));
    }
    const elapsed = Date.now() - started;

    // Nothing but the requests: the same time without a request makes no round trip.
    const idleFrom = trips.length;
    await sleep(elapsed);
    expect(trips.slice(idleFrom).map(label)).toEqual([]);

    const channelListReads = windows.flat().filter(isChannelListRead).length;
    expect(channelListReads).toBeLessThanOrEqual(Math.floor(elapsed / 1000) + 1);

    const counts = windows.map((window) => {
      const counted = window.filter((trip) => !isChannelListRead(trip));
      return {
        postgres: counted.filter((trip) => trip.to === 'postgres').length,
        redis: counted.filter((trip) => trip.to === 'redis').length,
        trips: counted.map(label),
      };
    });
    // Deterministic: every measured generation costs the same.
    for (const count of counts) {
      if (count.postgres !== counts[0]!.postgres || count.redis !== counts[0]!.redis) {
        throw new Error(`generations of the same request differ:\n${counts[0]!.trips.join('\n')}\n---\n${count.trips.join('\n')}`);
      }
    }
    return counts[0]!;
  }

  /** The measured round trips are exactly these; the message lists one generation's when they are not. */
  function expectRoundTrips(counted: { postgres: number; redis: number; trips: string[] }, expected: { postgres: number; redis: number }): void {
    const measured = { postgres: counted.postgres, redis: counted.redis };
    if (measured.postgres === expected.postgres && measured.redis === expected.redis) return;
    throw new Error(`round trips per generation: expected ${JSON.stringify(expected)}, measured ${JSON.stringify(measured)}:\n${counted.trips.join('\n')}`);
  }

  it('b64_json (the benchmark row): 2 PostgreSQL, 1 Redis', async () => {
    const { key } = await gw.createKey();
    const counted = await measure(() => gw.api.client(key, localRequest({ response_format: 'b64_json' })));
    expectRoundTrips(counted, {
      // 1. The reservation: period roll-over, credits and the generation row (claimed by this process) in one statement
      //    (src/generation/reservations.repository.ts, through the StatementBatcher).
      // 2. The settlement: attempt rows, the generation's status and every usage rollup in one statement
      //    (src/generation/settlement.repository.ts, through the StatementBatcher).
      postgres: 2,
      // 1. The key's requests-per-minute count: the `cgwLeaseAcquire` script on the key's `rpm` sorted set
      //    (src/ratelimit/lease-rate-limiter.ts -> src/leases/redis-lease-store.ts).
      redis: 1,
    });
  });

  it('url (the default response_format): 3 PostgreSQL, 1 Redis', async () => {
    const { key } = await gw.createKey();
    const counted = await measure(() => gw.api.client(key, localRequest({ response_format: 'url' })));
    expectRoundTrips(counted, {
      // 1. The reservation (as above).
      // 2. The stored image's row, written before the bytes are put so the sweeper knows every object: one
      //    INSERT INTO stored_images, atomic by itself (src/images/images.service.ts, storeImages: writes.single).
      // 3. The settlement (as above).
      postgres: 3,
      // 1. The requests-per-minute count (as above).
      redis: 1,
    });
  });

  it('a key with max_concurrent: 2 PostgreSQL, 3 Redis', async () => {
    const { key } = await gw.createKey({ max_concurrent: 4 });
    const counted = await measure(() => gw.api.client(key, localRequest({ response_format: 'b64_json' })));
    expectRoundTrips(counted, {
      // 1. The reservation, 2. the settlement (as above).
      postgres: 2,
      // 1. The requests-per-minute count (as above).
      // 2. The `max_concurrent` slot: `cgwLeaseAcquire` on the key's `concurrency` sorted set (src/keys/concurrency-leases.ts).
      // 3. Its release after the settlement: ZREM (src/leases/redis-lease-store.ts, release).
      redis: 3,
    });
  });

  it('with an Idempotency-Key: 4 PostgreSQL, 1 Redis', async () => {
    const { key } = await gw.createKey();
    const counted = await measure((i) =>
      gw.api.send('post', '/images/generate', {
        body: localRequest({ response_format: 'b64_json' }),
        headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': `round-trips-${i}` },
      }),
    );
    expectRoundTrips(counted, {
      // 1. The key's claim: INSERT INTO idempotency_keys ... ON CONFLICT (src/idempotency/idempotency.repository.ts).
      // 2. The reservation, 3. the settlement (as above).
      // 4. The stored response: UPDATE idempotency_keys (src/idempotency/idempotency.repository.ts).
      postgres: 4,
      // 1. The requests-per-minute count (as above).
      redis: 1,
    });
  });

  it('a page of generations reads its projects and its images once, however many rows it holds', async () => {
    const projects = await Promise.all(
      ['a', 'b', 'c'].map(async (name) => {
        const res = await gw.api.admin('post', '/admin/projects', { name, owner: 'tests', credits_quota: 1000, quota_period_days: 30 });
        expect(res.status).toBe(201);
        return res.body.id as string;
      }),
    );
    const keys = await Promise.all(projects.map((project_id) => gw.createKey({ project_id })));
    // Stored images (url) in every project, 12 generations in all.
    for (let i = 0; i < 12; i++) expect((await gw.api.client(keys[i % 3]!.key, localRequest({ response_format: 'url' }))).status).toBe(200);
    const tripsOfPage = async (limit: number) => {
      const from = counter.trips.length;
      const res = await gw.api.admin('get', `/admin/generations?limit=${limit}`);
      expect([res.status, res.body.data.length]).toEqual([200, limit]);
      expect(res.body.data.every((generation: { data: unknown[] }) => generation.data.length === 1)).toBe(true);
      return counter.trips
        .slice(from)
        .filter((trip) => trip.to === 'postgres' && !isChannelListRead(trip))
        .map(label);
    };
    const one = await tripsOfPage(1);
    // 1. The page, 2. its rows' projects, 3. their stored images (src/generation/generation-resource.ts).
    expect(one).toHaveLength(3);
    expect(await tripsOfPage(12)).toHaveLength(3);
  });
});
