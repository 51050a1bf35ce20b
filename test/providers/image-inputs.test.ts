import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError } from '../../src/errors/api-error';
import { LocalProvider } from '../../src/providers/local/local.provider';
import { encodePng } from '../../src/providers/local/png';
import type { ProviderInputImage, ProviderRequest, WireClient } from '../../src/providers/provider';
import { UpstreamError } from '../../src/providers/upstream-errors';
import { wireClient } from '../../src/providers/wire-client';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';

/** A PNG of this size whose pixels all have one colour (so two of them differ by their bytes). */
function png(width: number, height: number, shade = 128): ProviderInputImage {
  const bytes = encodePng(width, height, new Uint8Array(width * height * 3).fill(shade));
  return { bytes, format: 'png', mimeType: 'image/png', width, height };
}

/** The header of a baseline JPEG (SOI, APP0, SOF0), enough for an upstream to read its format and size. */
function jpeg(width: number, height: number): ProviderInputImage {
  const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]);
  const sof0 = Buffer.from([
    0xff,
    0xc0,
    0x00,
    0x11,
    0x08,
    height >> 8,
    height & 0xff,
    width >> 8,
    width & 0xff,
    0x03,
    0x01,
    0x22,
    0x00,
    0x02,
    0x11,
    0x01,
    0x03,
    0x11,
    0x01,
  ]);
  const bytes = Buffer.concat([Buffer.from([0xff, 0xd8]), app0, sof0, Buffer.from([0xff, 0xd9])]);
  return { bytes, format: 'jpeg', mimeType: 'image/jpeg', width, height };
}

const gif = (width: number, height: number): ProviderInputImage => {
  const bytes = Buffer.alloc(32);
  bytes.write('GIF89a', 0, 'latin1');
  bytes.writeUInt16LE(width, 6);
  bytes.writeUInt16LE(height, 8);
  return { bytes, format: 'gif', mimeType: 'image/gif', width, height };
};

/** Test upstreams listen on 127.0.0.1. */
const settings = { pollIntervalMs: 5, publicOnly: false };
const signal = () => new AbortController().signal;
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('Ark (Seedream 4.x) and OpenAI-compatible upstreams: input images inline', () => {
  let ark: FakeImagesApi;
  let openai: FakeImagesApi;
  let jimeng: WireClient;
  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-key', flavour: 'ark' });
    openai = await startFakeImagesApi({ apiKey: 'sk-test', flavour: 'openai' });
    jimeng = wireClient({ format: 'ark', provider: 'jimeng', baseUrl: `${ark.url}/api/v3`, credentials: { api_key: 'ark-key' } }, settings);
  });
  afterAll(async () => {
    await ark.close();
    await openai.close();
  });

  const seedream = (inputImages: ProviderInputImage[], overrides: Partial<ProviderRequest> = {}): ProviderRequest => ({
    prompt: `put them together ${inputImages.length}`,
    upstreamModel: 'doubao-seedream-4-5-251128',
    transport: 'ark',
    n: 1,
    width: 2048,
    height: 2048,
    responseFormat: 'b64_json',
    inputImages,
    ...overrides,
  });

  it('one input: `image` is one data URI string, with group output disabled', async () => {
    const input = png(64, 48);
    const images = await jimeng.generate(seedream([input]), signal());
    expect(images).toHaveLength(1);
    expect(ark.requests.at(-1)).toEqual({
      model: 'doubao-seedream-4-5-251128',
      prompt: 'put them together 1',
      image: `data:image/png;base64,${input.bytes.toString('base64')}`,
      size: '2048x2048',
      response_format: 'b64_json',
      watermark: false,
      sequential_image_generation: 'disabled',
    });
    // What Ark read: the same bytes, a PNG of that size.
    expect(ark.inputs.at(-1)!.images).toEqual([
      expect.objectContaining({ via: 'data-uri', declared: 'png', format: 'png', width: 64, height: 48, bytes: input.bytes }),
    ]);
  });

  it("several inputs: `image` is an array in the client's order, each call of n carrying all of them", async () => {
    const inputs = [png(64, 64, 10), jpeg(800, 600), gif(30, 300)];
    const before = ark.inputs.length;
    await jimeng.generate(seedream(inputs, { n: 2 }), signal());
    const calls = ark.requests.slice(-2);
    for (const call of calls) {
      expect(call.image).toEqual(inputs.map((i) => `data:${i.mimeType};base64,${i.bytes.toString('base64')}`));
      expect(call.sequential_image_generation).toBe('disabled');
    }
    const received = ark.inputs.slice(before);
    expect(received).toHaveLength(2);
    expect(received[0]!.images.map((i) => [i?.format, i?.width, i?.height])).toEqual([
      ['png', 64, 64],
      ['jpeg', 800, 600],
      ['gif', 30, 300],
    ]);
  });

  it("fourteen inputs are taken; the fake refuses a fifteenth as Ark does (so a drift in the gateway's limits shows)", async () => {
    const fourteen = Array.from({ length: 14 }, (_, i) => png(16, 16, i));
    await expect(jimeng.generate(seedream(fourteen), signal())).resolves.toHaveLength(1);
    expect(ark.inputs.at(-1)!.images).toHaveLength(14);
    const refused = jimeng.generate(seedream([...fourteen, png(16, 16, 99)]), signal());
    await expect(refused).rejects.toBeInstanceOf(UpstreamError);
    await expect(refused).rejects.toMatchObject({ code: 'provider_error', message: expect.stringContaining('takes 1 to 14 images') });
  });

  it('the fake checks what it decodes: bytes that are no image, or a model without `image`, are refused', async () => {
    const notImage: ProviderInputImage = { ...png(16, 16), bytes: Buffer.from('<html>nope</html>') };
    await expect(jimeng.generate(seedream([notImage]), signal())).rejects.toMatchObject({
      message: expect.stringContaining('format unknown is not supported'),
    });
    const t2i = seedream([png(16, 16)], { upstreamModel: 'doubao-seedream-3-0-t2i-250415', width: 1024, height: 1024 });
    await expect(jimeng.generate(t2i, signal())).rejects.toMatchObject({ message: expect.stringContaining('does not support the parameter `image`') });
  });

  it('an input with a gateway URL (a model whose delivery is `url`) is sent as that URL, and the upstream fetches it', async () => {
    const input = png(40, 40, 77);
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'image/png', 'Content-Length': input.bytes.length });
      res.end(input.bytes);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/images/img_1/content?sig=abc`;
    try {
      await jimeng.generate(seedream([{ ...input, url }]), signal());
      expect(ark.requests.at(-1)!.image).toBe(url);
      expect(ark.inputs.at(-1)!.images[0]).toMatchObject({ via: 'url', url, format: 'png', bytes: input.bytes });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('OpenAI-compatible: `image` and `mask` as data URIs, `n` in one call', async () => {
    const provider = wireClient({ format: 'images-api', provider: 'selfhosted', baseUrl: `${openai.url}/v1`, credentials: { api_key: 'sk-test' } }, settings);
    const [source, mask] = [png(32, 32, 1), png(32, 32, 255)];
    const images = await provider.generate(
      { prompt: 'edit it', upstreamModel: 'gpt-image-1', n: 2, width: 1024, height: 1024, responseFormat: 'b64_json', inputImages: [source!], mask: mask! },
      signal(),
    );
    expect(images).toHaveLength(2);
    expect(openai.requests.at(-1)).toMatchObject({
      n: 2,
      image: `data:image/png;base64,${source!.bytes.toString('base64')}`,
      mask: `data:image/png;base64,${mask!.bytes.toString('base64')}`,
    });
    expect(openai.inputs.at(-1)!.mask).toMatchObject({ format: 'png', bytes: mask!.bytes });
  });

  it('a text-only request carries no `image` field', async () => {
    await jimeng.generate(seedream([]), signal());
    expect(ark.requests.at(-1)).not.toHaveProperty('image');
  });
});

describe('the visual API (Jimeng 4.0): image_urls are gateway URLs the upstream fetches', () => {
  const credentials = { accessKeyId: 'AKtest', secretAccessKey: 'secret-for-tests' };
  let fake: FakeVisual;
  let provider: WireClient;
  /** Stands in for the gateway's signed input URLs: GET /inputs/<name> serves what `served` holds. */
  let files: http.Server;
  let filesUrl: string;
  const served = new Map<string, { type: string; body: Buffer }>();
  const fetched: string[] = [];

  beforeAll(async () => {
    fake = await startFakeVisual(credentials);
    provider = wireClient(
      {
        format: 'visual',
        provider: 'jimeng',
        baseUrl: fake.url,
        credentials: { access_key_id: credentials.accessKeyId, secret_access_key: credentials.secretAccessKey },
      },
      settings,
    );
    files = http.createServer((req, res) => {
      fetched.push(req.url ?? '');
      const file = served.get(new URL(req.url ?? '/', 'http://x').pathname);
      if (!file) {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        return res.end('expired or unknown');
      }
      res.writeHead(200, { 'Content-Type': file.type, 'Content-Length': file.body.length });
      res.end(file.body);
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await fake.close();
    await new Promise((resolve) => files.close(resolve));
  });

  /** An input served at /inputs/<name> with a signature in its query, like the gateway's signed URLs. */
  const servedInput = (name: string, image: ProviderInputImage, body: Buffer = image.bytes, type = image.mimeType): ProviderInputImage => {
    served.set(`/inputs/${name}`, { type, body });
    return { ...image, url: `${filesUrl}/inputs/${name}?expires=9999999999&sig=fake` };
  };
  const v40 = (prompt: string, inputImages: ProviderInputImage[], n = 1): ProviderRequest => ({
    prompt,
    upstreamModel: 'jimeng_t2i_v40',
    transport: 'visual',
    n,
    width: 2048,
    height: 2048,
    responseFormat: 'b64_json',
    inputImages,
  });

  it("sends each input's URL as image_urls (in order), and the upstream fetches the bytes from them", async () => {
    const a = servedInput('a.png', png(300, 200, 5));
    const b = servedInput('b.jpg', jpeg(1024, 768));
    const images = await provider.generate(v40('two references', [a, b]), signal());
    expect(images).toHaveLength(1);
    const submit = fake.requests.find((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === 'two references')!;
    expect(submit.body).toEqual({
      req_key: 'jimeng_t2i_v40',
      image_urls: [a.url, b.url],
      prompt: 'two references',
      width: 2048,
      height: 2048,
      force_single: true,
    });
    const received = fake.inputs.find((i) => i.prompt === 'two references')!;
    expect(received.urls).toEqual([a.url, b.url]);
    expect(received.images.map((i) => [i?.format, i?.width, i?.height, i && sha(i.bytes)])).toEqual([
      ['png', 300, 200, sha(a.bytes)],
      ['jpeg', 1024, 768, sha(b.bytes)],
    ]);
  });

  it('n images: one task each, every task with the same image_urls, each fetched', async () => {
    const a = servedInput('n.png', png(64, 64, 9));
    fetched.length = 0;
    await provider.generate(v40('three of them', [a], 3), signal());
    expect(fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === 'three of them').map((r) => r.body.image_urls)).toEqual([
      [a.url],
      [a.url],
      [a.url],
    ]);
    expect(fetched.filter((path) => path.startsWith('/inputs/n.png'))).toHaveLength(3);
  });

  it('a URL that serves no image fails the task as the real API does (accepted, then failed: provider_error)', async () => {
    const page = servedInput('page.png', png(64, 64), Buffer.from('<!doctype html><p>sign in</p>'), 'text/html');
    await expect(provider.generate(v40('an html page', [page]), signal())).rejects.toMatchObject({
      code: 'provider_error',
      message: expect.stringContaining('not a JPEG or PNG image'),
    });
    const gone = { ...png(64, 64), url: `${filesUrl}/inputs/expired.png?sig=old` };
    await expect(provider.generate(v40('an expired url', [gone]), signal())).rejects.toMatchObject({
      code: 'provider_error',
      message: expect.stringContaining('download failed'),
    });
    // A format the visual API does not take (GIF) fails the task too: the gateway's limits must keep it out.
    const animated = servedInput('anim.gif', gif(64, 64));
    await expect(provider.generate(v40('a gif', [animated]), signal())).rejects.toMatchObject({ message: expect.stringContaining('not a JPEG or PNG image') });
  });

  it("an input without a gateway URL is the gateway's fault: internal_error, and nothing is submitted", async () => {
    const submitsBefore = fake.requests.length;
    const failure = provider.generate(v40('no url', [png(64, 64)]), signal());
    await expect(failure).rejects.toBeInstanceOf(ApiError);
    await expect(failure).rejects.toMatchObject({ code: 'internal_error', message: expect.stringContaining('Input image 1 has no gateway URL') });
    expect(fake.requests.length).toBe(submitsBefore);
  });

  it('a text-only request carries no image_urls', async () => {
    await provider.generate(v40('just text', []), signal());
    expect(fake.requests.find((r) => r.body.prompt === 'just text')!.body).not.toHaveProperty('image_urls');
  });
});

describe('the local provider: a deterministic picture of its inputs', () => {
  const local = new LocalProvider();
  const request = (overrides: Partial<ProviderRequest> = {}): ProviderRequest => ({
    prompt: 'a lighthouse',
    upstreamModel: 'local-1',
    n: 2,
    width: 64,
    height: 48,
    seed: 3,
    responseFormat: 'b64_json',
    ...overrides,
  });
  const digests = async (overrides: Partial<ProviderRequest>) =>
    (await local.generate(request(overrides), signal())).map((image) => sha(Buffer.from(image.b64Json!, 'base64')));

  it('the same inputs give the same bytes; other inputs, their order, or a mask give others', async () => {
    const [a, b] = [png(20, 20, 1), png(20, 20, 2)];
    const withA = await digests({ inputImages: [a!] });
    expect(await digests({ inputImages: [{ ...a!, bytes: Buffer.from(a!.bytes) }] })).toEqual(withA);
    const textOnly = await digests({});
    const others = [
      textOnly,
      await digests({ inputImages: [b!] }),
      await digests({ inputImages: [a!, b!] }),
      await digests({ inputImages: [b!, a!] }),
      await digests({ inputImages: [a!], mask: b! }),
    ];
    for (const other of others) expect(other).not.toEqual(withA);
    expect(new Set(others.map((d) => d.join()))).toHaveProperty('size', others.length);
    // The n images of one request still differ from each other.
    expect(withA[0]).not.toBe(withA[1]);
    // The same mask again: the same bytes.
    expect(await digests({ inputImages: [a!], mask: b! })).toEqual(others[4]);
  });
});
