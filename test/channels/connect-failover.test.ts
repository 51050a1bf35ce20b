import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { blackholedUpstream, silentUpstream, type TestUpstream } from '../fakes/unreachable';
import { addChannel, closedPort } from '../helpers/channels';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * The connect phase of the upstream hop (docs/operators/channels.md): a call that never reached the upstream
 * (connection refused, connect timeout) goes to another channel; a call that reached it and got no
 * answer (the attempt's own timeout) does not, since Ark may have accepted and billed it.
 */
const ARK_KEY = 'ark-key-connect-failover-01';

describe('channels: failover in the connect phase of the upstream hop', () => {
  let healthy: FakeImagesApi;
  let t: TestGateway;
  let key: string;
  const created: string[] = [];
  const upstreams: TestUpstream[] = [];

  beforeAll(async () => {
    healthy = await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' });
    // A connect deadline well under the channels' attempt timeouts, so the two are told apart.
    t = await startTestGateway({ UPSTREAM_CONNECT_TIMEOUT_MS: '300', CHANNEL_QUEUE_TIMEOUT_MS: '300', PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5' });
    ({ key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1_000_000 }));
  });
  afterAll(async () => {
    await t.close();
    await healthy.close();
  });
  afterEach(async () => {
    for (const id of created.splice(0)) await t.api.admin('delete', `/admin/channels/${id}`);
    for (const upstream of upstreams.splice(0)) await upstream.close();
  });

  const arkChannel = (baseUrl: string, extra: Record<string, unknown> = {}) =>
    addChannel(
      t.api,
      {
        name: `ark ${created.length}`,
        provider: 'jimeng',
        transport: 'ark',
        base_url: baseUrl,
        models: [{ model: 'jimeng-4.5' }],
        credentials: { api_key: ARK_KEY },
        ...extra,
      },
      created,
    );
  const generate = (prompt: string) => t.api.client(key, { prompt, model: 'jimeng-4.5', size: '2048x2048', response_format: 'b64_json' });
  const attemptsOf = async (id: string) =>
    (await t.internal.service('get', `/api/v1/creative/generations/${id}`)).body.attempts as Array<Record<string, unknown>>;

  it('connection refused: fails over to the next channel', async () => {
    const first = await arkChannel(`http://127.0.0.1:${await closedPort()}`, { priority: 10 });
    const second = await arkChannel(healthy.url);
    const calls = healthy.counters.calls;
    const res = await generate('refused');
    expect(res.status).toBe(200);
    expect(healthy.counters.calls - calls).toBe(1);
    expect(await attemptsOf(res.body.id)).toEqual([
      expect.objectContaining({ channel_id: first.id, outcome: 'failed_over', error_code: 'provider_error' }),
      expect.objectContaining({ channel_id: second.id, outcome: 'succeeded' }),
    ]);
  });

  it('connect timeout (a listener that never accepts, its backlog full): fails over, before the attempt timeout', async () => {
    const hole = await blackholedUpstream();
    upstreams.push(hole);
    // The attempt timeout (5 s) is far past the connect timeout (300 ms): the failure is the connect's.
    const first = await arkChannel(hole.url, { priority: 10, timeout_ms: 5000 });
    const second = await arkChannel(healthy.url);
    const res = await generate('blackholed');
    expect(res.status).toBe(200);
    const attempts = await attemptsOf(res.body.id);
    expect(attempts).toEqual([
      expect.objectContaining({ channel_id: first.id, outcome: 'failed_over', error_code: 'provider_error' }),
      expect.objectContaining({ channel_id: second.id, outcome: 'succeeded' }),
    ]);
    expect(attempts[0]!.latency_ms).toBeLessThan(5000);
  });

  it('connected and sent, no answer: 504 at the attempt timeout, never sent to another channel', async () => {
    const silent = await silentUpstream();
    upstreams.push(silent);
    await arkChannel(silent.url, { priority: 10, timeout_ms: 600 });
    await arkChannel(healthy.url);
    const calls = healthy.counters.calls;
    const res = await generate('sent, then silence');
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe('provider_timeout');
    expect(silent.requests()).toBe(1);
    expect(healthy.counters.calls - calls).toBe(0);
  });
});
