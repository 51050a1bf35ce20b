import dns from 'node:dns';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';

/** example.com's address: public, and never reached here (no test connects to it). */
const PUBLIC_ADDRESS = '93.184.216.34';

/**
 * A local upstream speaking the images API on 127.0.0.1 only: its answer names `imageUrl`, and it
 * serves `/files/*.png` (`/files/stalled.png`: the headers and 16 bytes, then nothing).
 */
async function startUpstream(): Promise<{ url: string; port: number; files: string[]; answer(url: string): void; close(): Promise<void> }> {
  const png = testPng(64, 64);
  const files: string[] = [];
  let imageUrl = '';
  const server = http.createServer((req, res) => {
    if (req.method === 'POST') {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1, data: [{ url: imageUrl }] })));
      return;
    }
    files.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(png.length) });
    if (req.url === '/files/stalled.png') res.write(png.subarray(0, 16));
    else res.end(png);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    files,
    answer: (url) => void (imageUrl = url),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const catalog = JSON.stringify([{ model: 'flux-dev', provider: 'selfhosted', upstream_model: 'flux', credits_per_image: 2, default_size: '1024x1024' }]);

/**
 * The machine's resolver (dns.lookup, which every connection of this process asks) answering `name`
 * as a rebinding DNS server does: a public address first, then 127.0.0.1. Other names resolve as usual.
 */
function rebind(name: string): { lookups: () => number } {
  const real = dns.lookup.bind(dns) as (...args: unknown[]) => void;
  let lookups = 0;
  jest.spyOn(dns, 'lookup').mockImplementation(((hostname: string, options: unknown, callback?: unknown) => {
    const done = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
    const asked = (typeof options === 'object' && options !== null ? options : {}) as dns.LookupOptions;
    if (hostname !== name) return real(hostname, typeof options === 'function' ? {} : options, done);
    lookups += 1;
    const answer = [
      { address: PUBLIC_ADDRESS, family: 4 },
      { address: '127.0.0.1', family: 4 },
    ];
    process.nextTick(() => (asked.all ? done(null, answer) : done(null, PUBLIC_ADDRESS, 4)));
  }) as unknown as typeof dns.lookup);
  return { lookups: () => lookups };
}

/**
 * An upstream's image URL on a name that resolves to a public address first and to 127.0.0.1 after
 * it: without CHANNEL_ALLOW_PRIVATE_UPSTREAMS, the download is refused at the connection (the resolved
 * address is checked: shared/outbound.ts), so the loopback-only listener never serves it.
 */
describe('result downloads connect to public addresses only (DNS rebinding)', () => {
  const NAME = 'upstream.rebind.test';
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let t: TestGateway;
  let resolver: { lookups: () => number };

  beforeAll(async () => {
    upstream = await startUpstream();
    resolver = rebind(NAME);
    // The operator's own account on that name (an environment account may reach private addresses, so its
    // API call is answered by the listener); its results are downloaded as any upstream's, public only.
    t = await startTestGateway({
      CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'false',
      OPENAI_COMPAT_BASE_URL: `http://${NAME}:${upstream.port}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-rebind',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      PROVIDER_SELFHOSTED_MAX_ATTEMPTS: '1',
      MODEL_CATALOG: catalog,
    });
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await t.close();
    await upstream.close();
  });

  it('a public address first, then 127.0.0.1: 502 provider_error, nothing downloaded, nothing charged', async () => {
    const { id, key } = await t.createKey({ allowed_providers: ['selfhosted'] });
    upstream.answer(`http://${NAME}:${upstream.port}/files/secret.png`);
    const res = await t.api.client(key, { prompt: 'rebound', model: 'flux-dev' });
    expect([res.status, res.body.error?.code]).toEqual([502, 'provider_error']);
    expect(res.body.error.message).toMatch(/could not take: downloading it failed \(.*resolves to a blocked address \(127\.0\.0\.1\)\)/);
    expect(upstream.files).toEqual([]);
    // The API call and the download each asked the resolver.
    expect(resolver.lookups()).toBeGreaterThanOrEqual(2);
    expect(await t.api.creditsUsed(id)).toBe(0);
  });
});

/** A download whose headers arrived and whose body stops coming is a provider failure like any other. */
describe('a result download that times out while reading the body', () => {
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let t: TestGateway;

  beforeAll(async () => {
    upstream = await startUpstream();
    t = await startTestGateway({
      OPENAI_COMPAT_BASE_URL: `${upstream.url}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-stall',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      PROVIDER_SELFHOSTED_MAX_ATTEMPTS: '1',
      IMAGE_FETCH_TIMEOUT_MS: '200',
      MODEL_CATALOG: catalog,
    });
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  it('is 502 provider_error, nothing charged, no unhandled error', async () => {
    const { id, key } = await t.createKey({ allowed_providers: ['selfhosted'] });
    upstream.answer(`${upstream.url}/files/stalled.png`);
    const res = await t.api.client(key, { prompt: 'a body that never ends', model: 'flux-dev' });
    expect([res.status, res.body.error?.code]).toEqual([502, 'provider_error']);
    expect(res.body.error.message).toContain('downloading it took longer than 200 ms');
    expect(upstream.files).toEqual(['/files/stalled.png']);
    expect(await t.api.creditsUsed(id)).toBe(0);
    expect(t.logs.filter((line) => line.includes('unhandled error'))).toEqual([]);
  });
});
