import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { routeOutboundForTests } from '../../src/shared/outbound';
import { type FakeBfl, startFakeBfl } from '../fakes/fake-bfl';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';

const BFL_KEY = 'bfl-result-hosts-key';

/**
 * Where a provider's results may be downloaded from (docs/clients/image-storage.md): its descriptor's
 * documented hosts over https, what the operator adds for it (PROVIDER_<NAME>_IMAGE_HOSTS) or for every
 * provider (IMAGE_FETCH_ALLOWED_HOSTS), and its account's own host. The CDN hosts are routed back to the
 * local fakes (routeOutboundForTests); the gateway sees the URLs the real APIs answer.
 */
describe("BFL's result.sample: on BFL's documented hosts only, over https", () => {
  const BLOB_HOST = 'bfldeliveryprod.blob.core.windows.net';
  const REGIONAL_BLOB_HOST = 'bfldeliveryprodeu4.blob.core.windows.net';
  let blob: FakeBfl;
  let regional: FakeBfl;
  const downloaded: string[] = [];

  beforeAll(async () => {
    blob = await startFakeBfl({ apiKey: BFL_KEY, deliveryHost: BLOB_HOST });
    regional = await startFakeBfl({ apiKey: BFL_KEY, deliveryHost: REGIONAL_BLOB_HOST });
    routeOutboundForTests((url) => {
      const fake = url.host === BLOB_HOST ? blob : url.host === REGIONAL_BLOB_HOST ? regional : undefined;
      if (fake) downloaded.push(url.href);
      return fake?.url;
    });
  });
  afterAll(async () => {
    routeOutboundForTests(undefined);
    await blob.close();
    await regional.close();
  });

  const gateway = (fake: FakeBfl, env: Record<string, string> = {}) =>
    startTestGateway({ BFL_API_KEY: BFL_KEY, BFL_BASE_URL: fake.url, UPSTREAM_POLL_INTERVAL_MS: '5', PROVIDER_BFL_MAX_ATTEMPTS: '1', ...env });
  const generate = async (t: TestGateway, prompt: string) => {
    const { id, key } = await t.createKey({ allowed_providers: ['bfl'], credits_quota: 100_000 });
    const res = await t.api.client(key, { prompt, model: 'flux-pro-1.1', size: '1024x768' });
    return { res, charged: await t.api.creditsUsed(id) };
  };

  it("a sample on the Azure storage host of BFL's own examples is downloaded and stored", async () => {
    const t = await gateway(blob);
    try {
      const { res, charged } = await generate(t, 'a sample on the blob host');
      expect(res.status).toBe(200);
      expect(res.body.data[0].url).toContain(`${t.gateway.url}/images/img_`);
      expect(downloaded.at(-1)).toMatch(new RegExp(`^https://${BLOB_HOST.replaceAll('.', '\\.')}/results/`));
      expect(charged).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
  });

  it('a sample on a host BFL does not document is refused (502 provider_error, nothing charged) until the operator adds it for bfl', async () => {
    const strict = await gateway(regional);
    try {
      const before = downloaded.length;
      const { res, charged } = await generate(strict, 'a sample on an unlisted host');
      expect([res.status, res.body.error?.code]).toEqual([502, 'provider_error']);
      expect(res.body.error.message).toContain(`host ${REGIONAL_BLOB_HOST} is not one of the provider's image hosts`);
      expect(charged).toBe(0);
      expect(downloaded.length).toBe(before);
    } finally {
      await strict.close();
    }
    const extended = await gateway(regional, { PROVIDER_BFL_IMAGE_HOSTS: REGIONAL_BLOB_HOST });
    try {
      const { res } = await generate(extended, 'the same host, added for bfl');
      expect(res.status).toBe(200);
    } finally {
      await extended.close();
    }
  });
});

describe("result hosts are https only, the account's own host aside", () => {
  const CDN_HOST = 'img.cdn.example';
  let upstream: http.Server;
  let origin: string;
  /** The URL the upstream's next answer names. */
  let imageUrl = '';
  const served: string[] = [];
  let t: TestGateway;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    const png = testPng(64, 64);
    upstream = http.createServer((req, res) => {
      if (req.method === 'POST') {
        req.resume();
        req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1, data: [{ url: imageUrl }] })));
        return;
      }
      served.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    routeOutboundForTests((url) => (url.hostname === CDN_HOST ? origin : undefined));
    t = await startTestGateway({
      OPENAI_COMPAT_BASE_URL: `${origin}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-hosts',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      PROVIDER_SELFHOSTED_MAX_ATTEMPTS: '1',
      PROVIDER_SELFHOSTED_IMAGE_HOSTS: CDN_HOST,
      MODEL_CATALOG: JSON.stringify([{ model: 'flux-dev', provider: 'selfhosted', upstream_model: 'flux', credits_per_image: 2, default_size: '1024x1024' }]),
    });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['selfhosted'] }));
  });
  afterAll(async () => {
    routeOutboundForTests(undefined);
    await t.close();
    upstream.closeAllConnections();
    await new Promise((resolve) => upstream.close(resolve));
  });

  const generate = async (url: string) => {
    imageUrl = url;
    const before = await t.api.creditsUsed(keyId);
    const res = await t.api.client(key, { prompt: 'where from', model: 'flux-dev' });
    return { res, charged: (await t.api.creditsUsed(keyId)) - before };
  };

  it('a host the operator added for the provider: https taken, http refused before any connection', async () => {
    expect((await generate(`https://${CDN_HOST}/files/a.png`)).res.status).toBe(200);
    expect(served.at(-1)).toBe('/files/a.png');
    const servedBefore = served.length;
    const { res, charged } = await generate(`http://${CDN_HOST}/files/b.png`);
    expect([res.status, res.body.error?.code]).toEqual([502, 'provider_error']);
    expect(res.body.error.message).toContain('https only');
    expect(charged).toBe(0);
    expect(served.length).toBe(servedBefore);
  });

  it("the account's own host keeps its base URL's scheme (http here)", async () => {
    expect((await generate(`${origin}/files/own.png`)).res.status).toBe(200);
  });

  it("another provider's documented host is not this provider's", async () => {
    const { res, charged } = await generate('https://v3.fal.media/files/x.png');
    expect([res.status, res.body.error?.code]).toEqual([502, 'provider_error']);
    expect(res.body.error.message).toContain("host v3.fal.media is not one of the provider's image hosts");
    expect(charged).toBe(0);
  });
});
