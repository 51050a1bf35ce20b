import { sql } from 'kysely';
import request from 'supertest';
import { testEngine } from '../helpers/test-database';
import { localRequest, SERVICE_TOKEN, startTestGateway, type TestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/** Holds this process's event loop (the in-process gateway's too) for `ms`: the stall an overload causes. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // busy
  }
}

async function overloadRefusals(t: TestGateway): Promise<number> {
  const res = await request(t.gateway.internalUrl).get('/metrics').set(SERVICE_TOKEN);
  return Number(/^creative_gateway_overload_refusals_total (\d+)/m.exec(res.text)?.[1] ?? 'NaN');
}

describe('x-shed-under-load: generation requests refused at once while the event loop runs late', () => {
  let t: TestGateway;
  let key: { id: string; key: string };
  beforeAll(async () => {
    t = await startTestGateway({ SHED_EVENT_LOOP_DELAY_MS: '100' });
    key = await t.createKey({ rate_limit_rpm: 1000 });
  });
  afterAll(() => t.close());

  /** A stall of 4× the threshold, then `send`, until one answer is the refusal (the load is read every half second). */
  async function refusedAfterStall(send: () => Promise<request.Response>): Promise<request.Response> {
    let refused: request.Response | undefined;
    await until(async () => {
      stall(400);
      const res = await send();
      if (res.status === 503) refused = res;
      return refused !== undefined;
    }, 'a request refused after a stall');
    return refused!;
  }

  it('POST /images/generate: 503 overloaded with Retry-After, nothing counted or reserved, then served once the loop is on time', async () => {
    const before = { credits: await t.api.creditsUsed(key.id), refusals: await overloadRefusals(t) };
    const refused = await refusedAfterStall(async () => {
      const credits = await t.api.creditsUsed(key.id);
      const res = await t.api.client(key.key, localRequest());
      // A request served in a window the stall did not reach is charged as usual: only the refusal is checked.
      if (res.status === 503) expect(await t.api.creditsUsed(key.id)).toBe(credits);
      return res;
    });
    expect(refused.body.error).toMatchObject({ code: 'overloaded', type: 'api_error', param: null });
    expect(refused.headers['retry-after']).toBe('1');
    // Refused before the RPM count: no rate-limit headers.
    expect(refused.headers['x-ratelimit-remaining']).toBeUndefined();
    expect(await overloadRefusals(t)).toBeGreaterThan(before.refusals);
    await until(async () => (await t.api.client(key.key, localRequest())).status === 200, 'a request served after the stall');
  });

  it('the OpenAI-compatible generation and the internal generation are shed too', async () => {
    const openai = await refusedAfterStall(() =>
      t.api.client(key.key, { model: 'local-1', prompt: 'a lighthouse', size: '256x256' }, '/v1/images/generations'),
    );
    expect(openai.body.error.code).toBe('overloaded');
    const internal = await refusedAfterStall(() => t.internal.service('post', '/api/v1/creative/images/generations', localRequest()));
    expect(internal.body.error.code).toBe('overloaded');
  });

  it('operations that start no paid work are served during a stall', async () => {
    stall(400);
    expect((await t.api.send('get', '/healthz')).status).toBe(200);
    expect((await t.api.admin('get', `/admin/keys/${key.id}`)).status).toBe(200);
  });
});

describe('SHED_EVENT_LOOP_DELAY_MS=0', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SHED_EVENT_LOOP_DELAY_MS: '0' });
  });
  afterAll(() => t.close());

  it('never refuses: a request after a stall is served', async () => {
    const { key } = await t.createKey();
    for (let i = 0; i < 3; i += 1) {
      stall(400);
      expect((await t.api.client(key, localRequest())).status).toBe(200);
    }
  });
});

describe('SHED_DATABASE_WAIT_MS: generation requests refused at once while all work waits for the database', () => {
  let t: TestGateway;
  let key: { id: string; key: string };
  beforeAll(async () => {
    // One pool connection on PostgreSQL: holding it makes the next checkout wait.
    t = await startTestGateway({ SHED_DATABASE_WAIT_MS: '100', DB_POOL_SIZE: '1' });
    key = await t.createKey({ rate_limit_rpm: 1000 });
  });
  afterAll(() => t.close());

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  /**
   * Sends a generation request while a queue for the database has stood for over two windows of the
   * monitor (every piece of database work waiting 250 ms or more, nothing else touching the database).
   * SQLite: writes queued for the group commit while the event loop is held (the loop's own signal is
   * off here). PostgreSQL: work that holds the one pool connection 300 ms, each asking for it 20 ms
   * after the one before got it.
   */
  async function sendDuringStandingQueue(): Promise<request.Response> {
    const { db, writes } = t.gateway.database;
    if (testEngine === 'sqlite') {
      for (let i = 0; i < 5; i += 1) {
        const queued = writes.run(async () => undefined);
        stall(300);
        await queued;
      }
      return t.api.client(key.key, localRequest());
    }
    const holders = Array.from({ length: 6 }, (_, i) => sleep(i * 20).then(() => db.connection().execute(() => sleep(300))));
    await sleep(1400);
    const res = await t.api.client(key.key, localRequest());
    await Promise.all(holders);
    return res;
  }

  it('503 overloaded with Retry-After, nothing reserved, then served once the queue is gone', async () => {
    const before = { credits: await t.api.creditsUsed(key.id), refusals: await overloadRefusals(t) };
    const refused = await sendDuringStandingQueue();
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'overloaded', type: 'api_error' });
    expect(refused.headers['retry-after']).toBe('1');
    expect(await t.api.creditsUsed(key.id)).toBe(before.credits);
    expect(await overloadRefusals(t)).toBeGreaterThan(before.refusals);
    await until(async () => (await t.api.client(key.key, localRequest())).status === 200, 'a request served once the queue is gone');
  });

  it('a burst (one long wait among short ones) refuses nothing', async () => {
    const { writes } = t.gateway.database;
    for (let i = 0; i < 3; i += 1) {
      const queued = writes.run(async () => undefined);
      if (testEngine === 'sqlite') stall(300);
      await queued;
      // Work that waits for nothing in the same windows.
      for (let j = 0; j < 5; j += 1) {
        expect((await t.api.client(key.key, localRequest())).status).toBe(200);
        await sleep(100);
      }
    }
  });
});

describe('ADMISSION_DATABASE_WAIT_MS: a reservation that waits too long for a busy database is refused, nothing reserved', () => {
  let t: TestGateway;
  let key: { id: string; key: string };
  beforeAll(async () => {
    // One pool connection on PostgreSQL: work holding it makes the reservation's checkout wait.
    t = await startTestGateway({ ADMISSION_DATABASE_WAIT_MS: '200', DB_POOL_SIZE: '1' });
    key = await t.createKey({ rate_limit_rpm: 1000 });
    // The key in the lookup's cache: only the reservation waits for the database then.
    expect((await t.api.client(key.key, localRequest())).status).toBe(200);
  });
  afterAll(() => t.close());

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  /**
   * Earlier work that keeps the database busy for `ms` (`answering`: running a statement every 20 ms),
   * resolved once it has the database: on SQLite a group-commit batch the writer is held in; on
   * PostgreSQL the one pool connection. `done` settles when it lets go.
   */
  async function holdDatabase(ms: number, answering: boolean): Promise<{ done: Promise<unknown> }> {
    const { db, writes } = t.gateway.database;
    let started!: () => void;
    const holding = new Promise<void>((resolve) => (started = resolve));
    const hold = async (run: () => Promise<unknown>) => {
      started();
      for (const end = Date.now() + ms; Date.now() < end;) {
        if (answering) await run();
        await sleep(20);
      }
    };
    const done =
      testEngine === 'sqlite'
        ? writes.run(() => hold(async () => undefined))
        : db.connection().execute((connection) => hold(() => sql`SELECT 1`.execute(connection)));
    await holding;
    return { done };
  }

  it('503 overloaded with Retry-After once its wait passes the bound while the database serves earlier work; served when it is free', async () => {
    const generations = async () => (await t.api.admin('get', `/admin/generations?key_id=${key.id}`)).body.data.length as number;
    const before = { credits: await t.api.creditsUsed(key.id), refusals: await overloadRefusals(t), generations: await generations() };
    const busy = await holdDatabase(1200, true);
    const refused = await t.api.client(key.key, localRequest());
    await busy.done;
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'overloaded', type: 'api_error', param: null });
    expect(refused.body.error.message).toMatch(/waited 200 ms for the database.*refused before anything was reserved and is not charged/);
    expect(refused.headers['retry-after']).toBe('1');
    expect(await t.api.creditsUsed(key.id)).toBe(before.credits);
    expect(await generations()).toBe(before.generations);
    expect(await overloadRefusals(t)).toBe(before.refusals + 1);
    expect((await t.api.client(key.key, localRequest())).status).toBe(200);
  });

  it('the OpenAI-compatible route is bounded alike', async () => {
    const busy = await holdDatabase(1200, true);
    const refused = await t.api.client(key.key, { model: 'local-1', prompt: 'a lighthouse', size: '256x256' }, '/v1/images/generations');
    await busy.done;
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('overloaded');
  });

  (testEngine === 'postgres' ? it : it.skip)('a database that answers nobody is not overload: the reservation waits for it and is served', async () => {
    const held = await holdDatabase(800, false);
    const served = await t.api.client(key.key, localRequest());
    await held.done;
    expect(served.status).toBe(200);
  });
});
