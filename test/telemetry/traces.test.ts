import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { type ExportedSpan, attributesOf, startOtlpReceiver } from './otlp-receiver';

const PROMPT = 'a zebra-striped lighthouse 7f3a91c2 at dawn';
const UPSTREAM_KEY = 'sk-openai-traces-upstream';
const COLLECTOR_TOKEN = 'collector-token-9d1e';
const SERVER = 2;
const CLIENT = 3;

/** A hop in front of the fake OpenAI that keeps the traceparent of every call it forwards. */
async function startRecordingHop(target: string): Promise<{ url: string; traceparents: Array<string | undefined>; close(): Promise<void> }> {
  const traceparents: Array<string | undefined> = [];
  const server = http.createServer((req, res) => {
    traceparents.push(req.headers.traceparent as string | undefined);
    const forward = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    traceparents,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const traceparentOf = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`;

describe('OpenTelemetry traces exported over OTLP/HTTP', () => {
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let fake: FakeOpenAIImages;
  let hop: Awaited<ReturnType<typeof startRecordingHop>>;
  let t: TestGateway;
  let clientKey: string;
  const syncTrace = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parent: '00f067aa0ba902b7' };
  const asyncTrace = { traceId: '5cf92f3577b34da6a3ce929d0e0e4737', parent: '10f067aa0ba902b8' };
  let spans: ExportedSpan[];
  let asyncId: string;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    fake = await startFakeOpenAIImages({ apiKey: UPSTREAM_KEY });
    hop = await startRecordingHop(fake.url);
    t = await startTestGateway({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_HEADERS: `x-collector-token=${COLLECTOR_TOKEN}`,
      OTEL_SERVICE_NAME: 'gateway-under-test',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
      // The tests' requests come from 127.0.0.1: a trusted proxy, whose traceparent is believed.
      TRUSTED_PROXIES: '127.0.0.1/32',
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${hop.url}/v1`,
    });
    ({ key: clientKey } = await t.createKey({ allowed_providers: ['openai', 'local'], credits_quota: 100_000 }));
    const sync = await t.api.send('post', '/images/generate', {
      body: { prompt: PROMPT, model: 'gpt-image-1', size: '1024x1024', quality: 'low' },
      headers: { Authorization: `Bearer ${clientKey}`, traceparent: traceparentOf(syncTrace.traceId, syncTrace.parent) },
    });
    expect(sync.status).toBe(200);
    const queued = await t.api.send('post', '/images/generate', {
      body: localRequest({ prompt: PROMPT }),
      headers: { Authorization: `Bearer ${clientKey}`, Prefer: 'respond-async', traceparent: traceparentOf(asyncTrace.traceId, asyncTrace.parent) },
    });
    expect(queued.status).toBe(202);
    asyncId = queued.body.id as string;
    const statusOf = async () => (await t.api.send('get', `/generations/${asyncId}`, { headers: { Authorization: `Bearer ${clientKey}` } })).body.status;
    await until(async () => (await statusOf()) === 'succeeded', 'the queued generation to succeed');
    // Closing flushes the spans still buffered.
    await t.close();
    spans = receiver.spans();
  });
  afterAll(async () => {
    await hop.close();
    await fake.close();
    await receiver.close();
  });

  const named = (name: string) => spans.filter((span) => span.name === name);
  const one = (name: string, traceId = syncTrace.traceId) => {
    const found = named(name).filter((span) => span.traceId === traceId);
    expect(found.map((span) => span.name)).toEqual([name]);
    return found[0] as ExportedSpan;
  };
  const parentOf = (span: ExportedSpan) => spans.find((candidate) => candidate.spanId === span.parentSpanId);
  const ancestors = (span: ExportedSpan): string[] => {
    const parent = parentOf(span);
    return parent ? [parent.name, ...ancestors(parent)] : [];
  };

  it("makes the request a server span (HTTP conventions) under a trusted proxy's traceparent", () => {
    const server = one('POST /images/generate');
    expect(server.kind).toBe(SERVER);
    expect(server.parentSpanId).toBe(syncTrace.parent);
    expect(attributesOf(server)).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/images/generate',
      'http.response.status_code': 200,
      'url.scheme': 'http',
      'server.address': '127.0.0.1',
      'gateway.operation_id': 'generateImage',
    });
    expect(receiver.resources()[0]).toMatchObject({ 'service.name': 'gateway-under-test', 'deployment.environment.name': 'test' });
    expect(receiver.headers[0]?.['x-collector-token']).toBe(COLLECTOR_TOKEN);
  });

  it('has children for admission, moderation, reservation and the run; storage and settlement under the run', () => {
    const server = one('POST /images/generate');
    for (const step of ['generation admit', 'generation moderate', 'generation reserve', 'generation run']) {
      expect(parentOf(one(step))?.spanId).toBe(server.spanId);
    }
    expect(ancestors(one('generation store images'))).toEqual(['generation execute', 'generation run', 'POST /images/generate']);
    expect(ancestors(one('generation settle'))).toEqual(['generation execute', 'generation run', 'POST /images/generate']);
  });

  it('has a span per upstream attempt with the GenAI conventions, and a client span whose traceparent the upstream got', () => {
    const attempt = one('generate_content gpt-image-1');
    expect(ancestors(attempt)).toContain('generation run');
    expect(attributesOf(attempt)).toMatchObject({
      'gen_ai.operation.name': 'generate_content',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-image-1',
      'gen_ai.response.model': 'gpt-image-1',
      'gateway.channel.id': 'chn_envOpenai',
      'gateway.outcome': 'succeeded',
    });
    expect(typeof attributesOf(attempt)['gen_ai.usage.output_tokens']).toBe('number');
    const call = one('POST');
    expect(call.kind).toBe(CLIENT);
    expect(attributesOf(call)).toMatchObject({ 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'http.response.status_code': 200 });
    expect(hop.traceparents).toEqual([traceparentOf(syncTrace.traceId, call.spanId)]);
  });

  it('runs a queued generation in a trace of its own, linked to the request that queued it', () => {
    const submit = one('POST /images/generate', asyncTrace.traceId);
    expect(attributesOf(submit)['http.response.status_code']).toBe(202);
    const background = named('generation background run');
    expect(background).toHaveLength(1);
    const [run] = background as [ExportedSpan];
    expect(run.parentSpanId ?? '').toBe('');
    expect(run.traceId).not.toBe(asyncTrace.traceId);
    expect(run.links?.map((link) => link.traceId)).toEqual([asyncTrace.traceId]);
    expect(attributesOf(run)['gateway.generation.id']).toBe(asyncId);
    expect(spans.filter((span) => span.traceId === run.traceId).map((span) => span.name)).toEqual(
      expect.arrayContaining(['generation store images', 'generation settle', 'generate_content local-1']),
    );
  });

  it('exports no prompt, key or credential', () => {
    const exported = receiver.bodies.join('\n');
    expect(exported.length).toBeGreaterThan(0);
    for (const secret of [PROMPT, 'zebra-striped', UPSTREAM_KEY, clientKey, COLLECTOR_TOKEN]) expect(exported).not.toContain(secret);
  });
});

describe('a traceparent from a peer that is not a trusted proxy', () => {
  it('is ignored: the request starts a trace of its own', async () => {
    const receiver = await startOtlpReceiver();
    const t = await startTestGateway({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces` });
    try {
      const { key } = await t.createKey();
      const res = await t.api.send('post', '/images/generate', {
        body: localRequest(),
        headers: { Authorization: `Bearer ${key}`, traceparent: traceparentOf('6cf92f3577b34da6a3ce929d0e0e4738', '20f067aa0ba902b9') },
      });
      expect(res.status).toBe(200);
    } finally {
      await t.close();
      await receiver.close();
    }
    const server = receiver.spans().find((span) => span.name === 'POST /images/generate');
    expect(server).toBeDefined();
    expect(server?.traceId).not.toBe('6cf92f3577b34da6a3ce929d0e0e4738');
    expect(server?.parentSpanId ?? '').toBe('');
  });
});
