import { asWritten, DEFAULT_CATALOG } from '../../src/config/catalog';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { addChannel as createChannel } from '../helpers/channels';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { SpecResponses } from '../helpers/spec-responses';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { until } from '../helpers/until';

/** Models of their own, so each scenario's accounts serve only its requests. */
const CATALOG = [
  ...DEFAULT_CATALOG.map(asWritten),
  ...['probe', 'cool'].map((name) => ({
    model: `seedream-${name}`,
    provider: 'jimeng',
    transport: 'ark',
    upstream_model: 'doubao-seedream-4-5-251128',
    credits_per_image: 1,
    default_size: '2048x2048',
  })),
];
const KEYS = { p: 'ark-key-p-0001', q: 'ark-key-q-0002', b: 'ark-key-b-0003', c: 'ark-key-c-0004' };
const PROBE_INTERVAL_MS = 2000;
const REPLICAS = 3;

describeWithServices.each([
  ['PostgreSQL + Redis', 'postgres', true],
  ['PostgreSQL without Redis', 'postgres', false],
  ['one SQLite file', 'sqlite', false],
] as const)('channel probe and cool-downs across replicas on %s', (_name, engine, withRedis) => {
  let database: ThrowawayDatabase;
  let redis: ReturnType<typeof throwawayRedisPrefix>;
  const processes: GatewayProcess[] = [];
  let replicas: ApiClient[];
  let internal: ApiClient[];
  let fakes: Record<keyof typeof KEYS, FakeImagesApi>;
  let key: string;

  beforeAll(async () => {
    database = await createThrowawayDatabase(engine);
    redis = throwawayRedisPrefix();
    const entries = await Promise.all(
      Object.entries(KEYS).map(async ([account, apiKey]) => [account, await startFakeImagesApi({ apiKey, flavour: 'ark' })] as const),
    );
    fakes = Object.fromEntries(entries) as typeof fakes;
    const env = {
      DATABASE_URL: database.url,
      ...(withRedis ? { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix } : { RATE_LIMIT_STORE: 'sql' }),
      MODEL_CATALOG: JSON.stringify(CATALOG),
      CHANNEL_PROBE_INTERVAL_MS: String(PROBE_INTERVAL_MS),
    };
    // One after the other: cold starts at once can miss the start deadline on a loaded machine.
    for (let i = 0; i < REPLICAS; i += 1) processes.push(await startGatewayProcess(env));
    replicas = processes.map((p) => new ApiClient(p.url));
    const creative = new SpecResponses('creative');
    internal = processes.map((p) => new ApiClient(p.internalUrl, creative));
    ({ key } = await createKeyVia(replicas[0]!, { allowed_providers: ['jimeng'], credits_quota: 1_000_000, rate_limit_rpm: 100_000 }));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await Promise.all(Object.values(fakes ?? {}).map((fake) => fake.close()));
    await database?.drop();
    await redis.drop();
  });

  const addChannel = async (account: keyof typeof KEYS, model: string, extra: Record<string, unknown> = {}) =>
    (
      await createChannel(replicas[0]!, {
        name: `account ${account}`,
        provider: 'jimeng',
        transport: 'ark',
        base_url: fakes[account].url,
        models: [{ model }],
        credentials: { api_key: KEYS[account] },
        ...extra,
      })
    ).id;
  const healthOf = async (replica: number, id: string) =>
    ((await internal[replica]!.service('get', '/api/v1/creative/channels/health')).body.data as Array<Record<string, unknown>>).find((c) => c.id === id);
  /** Until every replica routes with the channel (its list is re-read at most a second late). */
  const seenEverywhere = (id: string) =>
    until(async () => (await Promise.all(internal.map((_, i) => healthOf(i, id)))).every(Boolean), `every replica to list ${id}`);
  const statusOf = async (id: string) => (await replicas[0]!.admin('get', `/admin/channels/${id}`)).body.status as string;

  it('one replica probes at a time, once an interval; an auto-disabled account fixed again is re-enabled', async () => {
    const probed = await addChannel('p', 'seedream-probe', { priority: 10 });
    await addChannel('q', 'seedream-probe');
    await seenEverywhere(probed);
    fakes.p.setApiKey('revoked-by-the-provider');
    expect((await replicas[0]!.client(key, { prompt: 'revoked', model: 'seedream-probe' })).status).toBe(200);
    expect(await statusOf(probed)).toBe('auto_disabled');

    // Every replica ticks each interval; each probe is one call the revoked account refuses (401).
    const PROBES = 4;
    await until(() => fakes.p.unauthorizedAt.length >= 1 + PROBES, `${PROBES} probe calls`, 60_000);
    const calls = fakes.p.unauthorizedAt.slice(1, 1 + PROBES);
    const gaps = calls.slice(1).map((at, i) => at - calls[i]!);
    // Without the shared lease 3 replicas would each probe once an interval, in turn: any 3
    // consecutive gaps would add up to one interval, so one of them would be at most a third of
    // it. The lease spaces the calls a whole interval (less the jitter of the probe's own call,
    // up to half an interval tolerated), so this bound cannot pass by luck.
    expect(gaps).toHaveLength(3);
    expect(gaps.every((gap) => gap >= PROBE_INTERVAL_MS / 2)).toBe(true);
    expect(await statusOf(probed)).toBe('auto_disabled');
    // Each probe is logged by the replica that made it; more than one replica took part over time
    // is likely but not certain, so only the total is checked.
    const probeLines = () =>
      processes.reduce(
        (sum, p) =>
          sum +
          p.output
            .join('')
            .split('\n')
            .filter((line) => line.includes('probed an auto-disabled channel')).length,
        0,
      );
    // A replica logs its probe once the probe's answer is handled, after the fake counted the call: wait (bounded).
    await until(() => probeLines() >= PROBES, `${PROBES} probe log lines`, 10_000);
    expect(probeLines()).toBeGreaterThanOrEqual(PROBES);

    fakes.p.setApiKey(KEYS.p);
    await until(async () => (await statusOf(probed)) === 'enabled', 'the probe to re-enable the channel', 15_000);
    const passingProbes = () => fakes.p.requests.filter((r) => String(r.prompt).includes('small red circle')).length;
    expect(passingProbes()).toBe(1);
    // Routed to again by every replica once they re-read the list.
    await until(
      async () => (await Promise.all(internal.map((_, i) => healthOf(i, probed)))).every((h) => h?.status === 'enabled'),
      'every replica to see it enabled',
    );
    const before = fakes.p.counters.calls;
    for (const replica of replicas) expect((await replica.client(key, { prompt: 'back on p', model: 'seedream-probe' })).status).toBe(200);
    expect(fakes.p.counters.calls - before).toBe(REPLICAS);
    // No further probe of an enabled channel.
    expect(passingProbes()).toBe(1);
  }, 90_000);

  it("a busy account's Retry-After cools it down on every replica", async () => {
    const busy = await addChannel('b', 'seedream-cool', { priority: 10 });
    await addChannel('c', 'seedream-cool');
    await seenEverywhere(busy);
    fakes.b.setMode('busy'); // 429 with Retry-After: 30
    expect((await replicas[0]!.client(key, { prompt: 'busy first', model: 'seedream-cool' })).status).toBe(200);
    expect([fakes.b.counters.calls, fakes.c.counters.calls]).toEqual([1, 1]);
    // The other replicas have never called b; they skip it on the first replica's word.
    for (const replica of replicas.slice(1)) {
      for (let i = 0; i < 3; i += 1) expect((await replica.client(key, { prompt: `cooling ${i}`, model: 'seedream-cool' })).status).toBe(200);
    }
    expect(fakes.b.counters.calls).toBe(1);
    expect(fakes.c.counters.calls).toBe(1 + 3 * (REPLICAS - 1));
    const shown = await healthOf(REPLICAS - 1, busy);
    expect(Date.parse(String(shown?.cooling_down_until))).toBeGreaterThan(Date.now() + 20_000);
    fakes.b.setMode('normal');
  });
});
