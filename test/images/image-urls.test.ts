import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ImageUrlSigner } from '../../src/images/image-url-signer';
import { sweepOnce } from '../../src/maintenance/sweeper';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { createThrowawayDatabase } from '../helpers/test-database';
import { IMAGE_URL_SIGNING_KEY, type TestGateway, createKeyVia, startTestGateway } from '../helpers/test-gateway';
import { type TestS3, startTestS3 } from '../helpers/test-s3';

const HOUR_MS = 3_600_000;

/** The path and query of a gateway image URL (the ApiClient checks every answer against the spec). */
function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}

async function generateUrl(t: TestGateway, key: string, prompt = 'a kite over the dunes'): Promise<string> {
  const res = await t.api.client(key, { prompt, model: 'local-1', size: '64x64', seed: 7, response_format: 'url' });
  expect(res.status).toBe(200);
  return res.body.data[0].url as string;
}

describe.each([
  ['directory store', false],
  ['s3 store (s3rver)', true],
])('stable image URLs (getImage), %s', (_name, useS3) => {
  let t: TestGateway;
  let s3: TestS3 | undefined;
  let key: string;
  beforeAll(async () => {
    s3 = useS3 ? await startTestS3() : undefined;
    t = await startTestGateway({ IMAGE_RETENTION_HOURS: '2', ...(s3?.env ?? {}) });
    ({ key } = await t.createKey());
  });
  afterAll(async () => {
    await t.close();
    await s3?.close();
  });

  it("url answers the gateway's signed URL; it serves the same bytes as b64_json without the API key", async () => {
    const url = await generateUrl(t, key);
    expect(url.startsWith(`${t.gateway.url}/images/img_`)).toBe(true);
    const b64 = await t.api.client(key, { prompt: 'a kite over the dunes', model: 'local-1', size: '64x64', seed: 7, response_format: 'b64_json' });
    const res = await t.api.send('get', pathOf(url));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('image/png');
    expect(Buffer.compare(res.body as Buffer, Buffer.from(b64.body.data[0].b64_json, 'base64'))).toBe(0);
    expect(res.headers['content-length']).toBe(String((res.body as Buffer).length));
    expect(res.headers.etag).toMatch(/^"[0-9a-f]{64}"$/);
    expect(res.headers['accept-ranges']).toBe('bytes');
    const maxAge = Number(/^public, max-age=(\d+), immutable$/.exec(res.headers['cache-control'] as string)?.[1]);
    expect(maxAge).toBeGreaterThan(2 * 3600 - 60);
    expect(maxAge).toBeLessThanOrEqual(2 * 3600);
    // The URL expires no later than the retention.
    const expires = Number(new URL(url).searchParams.get('expires'));
    expect(expires * 1000).toBeLessThanOrEqual(t.clock.now() + 2 * HOUR_MS);
  });

  it('a synchronous b64_json answer hands the bytes over and keeps nothing', async () => {
    const count = async () =>
      Number(
        (
          await t.gateway.database.db
            .selectFrom('stored_images')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    const res = await t.api.client(key, { prompt: 'keep nothing', model: 'local-1', size: '32x32', response_format: 'b64_json' });
    expect(res.status).toBe(200);
    expect(Buffer.from(res.body.data[0].b64_json, 'base64').subarray(1, 4).toString()).toBe('PNG');
    expect(await count()).toBe(before);
  });

  it('HEAD answers the same headers without a body; If-None-Match answers 304', async () => {
    const url = await generateUrl(t, key, 'head and etag');
    const get = await t.api.send('get', pathOf(url));
    const head = await t.api.send('head', pathOf(url));
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(get.headers['content-length']);
    expect(head.headers.etag).toBe(get.headers.etag);
    expect(head.body).toEqual({});
    const cached = await t.api.send('get', pathOf(url), { headers: { 'If-None-Match': `W/"other", ${get.headers.etag as string}` } });
    expect(cached.status).toBe(304);
    expect(cached.headers.etag).toBe(get.headers.etag);
    expect(await t.api.send('get', pathOf(url), { headers: { 'If-None-Match': '"other"' } })).toHaveProperty('status', 200);
  });

  it('serves byte ranges: 206 with Content-Range, 416 past the end, the whole image for several ranges or a stale If-Range', async () => {
    const url = await generateUrl(t, key, 'ranges');
    const whole = (await t.api.send('get', pathOf(url))).body as Buffer;
    const size = whole.length;
    const range = async (value: string, extra: Record<string, string> = {}) => t.api.send('get', pathOf(url), { headers: { Range: value, ...extra } });

    const first = await range('bytes=0-9');
    expect(first.status).toBe(206);
    expect(first.headers['content-range']).toBe(`bytes 0-9/${size}`);
    expect(first.body).toEqual(whole.subarray(0, 10));
    const tail = await range('bytes=-5');
    expect(tail.headers['content-range']).toBe(`bytes ${size - 5}-${size - 1}/${size}`);
    expect(tail.body).toEqual(whole.subarray(size - 5));
    const open = await range('bytes=20-');
    expect(open.status).toBe(206);
    expect(open.body).toEqual(whole.subarray(20));
    const clipped = await range(`bytes=10-${size + 100}`);
    expect(clipped.headers['content-range']).toBe(`bytes 10-${size - 1}/${size}`);

    const past = await range(`bytes=${size}-`);
    expect(past.status).toBe(416);
    expect(past.headers['content-range']).toBe(`bytes */${size}`);
    expect(past.body.error.code).toBe('range_not_satisfiable');
    // Refusals are never cached.
    expect(past.headers['cache-control']).toBe('no-store');

    expect((await range('bytes=0-1,5-6')).status).toBe(200);
    expect((await range('bytes=0-9', { 'If-Range': '"stale"' })).status).toBe(200);
    expect((await range('bytes=0-9', { 'If-Range': first.headers.etag as string })).status).toBe(206);
  });

  it('an image whose bytes left the store (e.g. a bucket lifecycle rule) answers 410, not cached', async () => {
    const url = await generateUrl(t, key, 'vanished');
    await t.gateway.images.store.delete(new URL(url).pathname.split('/').pop() as string);
    const res = await t.api.send('get', pathOf(url));
    expect(res.status).toBe(410);
    expect(res.body.error.code).toBe('image_expired');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers.etag).toBeUndefined();
  });

  it('a tampered signature, expiry or id is 403 invalid_signature; a validly signed unknown image is 404', async () => {
    const url = new URL(await generateUrl(t, key, 'tamper'));
    const signature = url.searchParams.get('signature') as string;
    const expires = Number(url.searchParams.get('expires'));
    const id = url.pathname.split('/').pop() as string;
    const flipped = `${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
    for (const tampered of [
      `/images/${id}?expires=${expires}&signature=${flipped}`,
      `/images/${id}?expires=${expires + 3600}&signature=${signature}`,
      `/images/${id.slice(0, -1)}${id.endsWith('a') ? 'b' : 'a'}?expires=${expires}&signature=${signature}`,
    ]) {
      const res = await t.api.send('get', tampered);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'invalid_signature', type: 'permission_error', param: 'signature' });
    }
    const unknown = 'img_neverStoredHere';
    const signed = new ImageUrlSigner(IMAGE_URL_SIGNING_KEY).sign(unknown, expires);
    const missing = await t.api.send('get', `/images/${unknown}?expires=${expires}&signature=${signed}`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('image_not_found');
    expect((await t.api.send('get', `/images/${id}?expires=${expires}`)).status).toBe(400);
  });

  it('retention: the sweeper deletes expired images (bytes and record) and their URLs answer 410; younger ones stay', async () => {
    const older = await generateUrl(t, key, 'old image');
    t.clock.advanceMs(HOUR_MS);
    const younger = await generateUrl(t, key, 'young image');
    expect((await t.api.send('get', pathOf(older))).status).toBe(200);
    t.clock.advanceMs(HOUR_MS + 1000);
    // Past its expiry the URL is refused at once, before any sweep.
    const expired = await t.api.send('get', pathOf(older));
    expect(expired.status).toBe(410);
    expect(expired.body.error.code).toBe('image_expired');
    const olderId = new URL(older).pathname.split('/').pop() as string;
    const stillStored = await t.gateway.images.store.read(olderId);
    expect(stillStored).toBeDefined();
    stillStored?.destroy();

    const swept = await sweepOnce({ db: t.gateway.database.db, clock: t.clock, staleAfterMs: { local: 60_000 }, images: t.gateway.images });
    expect(swept.imagesDeleted).toBeGreaterThanOrEqual(1);
    expect(await t.gateway.images.store.read(olderId)).toBeUndefined();
    expect((await t.api.send('get', pathOf(older))).status).toBe(410);
    expect((await t.api.send('get', pathOf(younger))).status).toBe(200);
    // The row stays a day as a tombstone, then goes.
    const record = () => t.gateway.database.db.selectFrom('stored_images').select('deleted_at').where('id', '=', olderId).executeTakeFirst();
    expect((await record())?.deleted_at).toEqual(expect.any(Number));
    t.clock.advanceMs(25 * HOUR_MS);
    await t.gateway.images.sweep();
    expect(await record()).toBeUndefined();
  });
});

describe('images taken from an upstream: only its own hosts, only real images, bounded; failures are released', () => {
  let upstream: FakeImagesApi;
  let t: TestGateway;
  let key: string;
  let keyId: string;
  beforeAll(async () => {
    upstream = await startFakeImagesApi({ apiKey: 'sk-images', flavour: 'openai' });
    t = await startTestGateway({
      OPENAI_COMPAT_BASE_URL: `${upstream.url}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-images',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      IMAGE_MAX_BYTES: '65536',
      IMAGE_FETCH_ALLOWED_HOSTS: '',
      PROVIDER_SELFHOSTED_MAX_ATTEMPTS: '1',
      MODEL_CATALOG: JSON.stringify([{ model: 'flux-dev', provider: 'selfhosted', upstream_model: 'flux', credits_per_image: 2, default_size: '1024x1024' }]),
    });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['selfhosted'] }));
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });
  const creditsUsed = () => t.api.creditsUsed(keyId);

  it("fetches the upstream URL once and stores it: the client gets the gateway's URL", async () => {
    const res = await t.api.client(key, { prompt: 'a good image', model: 'flux-dev', n: 2 });
    expect(res.status).toBe(200);
    for (const image of res.body.data as Array<{ url: string }>) {
      expect(image.url.startsWith(`${t.gateway.url}/images/img_`)).toBe(true);
      const served = await t.api.send('get', pathOf(image.url));
      expect(served.headers['content-type']).toBe('image/png');
    }
    expect(await creditsUsed()).toBe(4);
  });

  it.each([
    ['[image:html]', /not a PNG, JPEG or WebP/],
    ['[image:huge]', /larger than 65536 bytes/],
    ['[image:redirect]', /host elsewhere\.invalid is not one of the provider's image hosts/],
    ['[image:foreign]', /host localhost:\d+ is not one of the provider's image hosts/],
    ['[image:missing]', /answered HTTP 404/],
    // base64 answers handed back as they came are checked from their first bytes and their length.
    ['[b64:html]', /not a PNG, JPEG or WebP/, 'b64_json'],
    ['[b64:huge]', /larger than 65536 bytes/, 'b64_json'],
  ])('%s is refused with 502 provider_error and nothing is charged', async (scenario, message, format = 'url') => {
    const before = await creditsUsed();
    const res = await t.api.client(key, { prompt: `bad upstream image ${scenario}`, model: 'flux-dev', response_format: format });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('provider_error');
    expect(res.body.error.message).toMatch(message);
    expect(await creditsUsed()).toBe(before);
    const row = await t.gateway.database.db
      .selectFrom('generations')
      .select(['status', 'error_code'])
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'failed', error_code: 'provider_error' });
  });
});

describe('an image store that fails', () => {
  let t: TestGateway;
  let blocker: string;
  beforeAll(async () => {
    // A file where the directory should be: every write fails.
    blocker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-blocked-')), 'not-a-directory');
    fs.writeFileSync(blocker, 'x');
    t = await startTestGateway({ IMAGE_DIRECTORY: blocker });
  });
  afterAll(async () => {
    await t.close();
    fs.rmSync(path.dirname(blocker), { recursive: true, force: true });
  });

  it('fails a url generation with 503 image_storage_unavailable and releases its credits; b64_json needs no store', async () => {
    const { id, key } = await t.createKey();
    const res = await t.api.client(key, { prompt: 'nowhere to put it', model: 'local-1', size: '32x32', response_format: 'url' });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('image_storage_unavailable');
    expect(await t.api.creditsUsed(id)).toBe(0);
    const b64 = await t.api.client(key, { prompt: 'nowhere to put it', model: 'local-1', size: '32x32', response_format: 'b64_json' });
    expect(b64.status).toBe(200);
    expect(await t.api.creditsUsed(id)).toBe(1);
  });
});

describe('two replicas sharing the database and an S3 bucket', () => {
  it("a URL one replica handed out is served by the other, and one replica's sweep makes both answer 410", async () => {
    const s3 = await startTestS3();
    const database = await createThrowawayDatabase();
    const shared = { ...s3.env, DATABASE_URL: database.url, PUBLIC_BASE_URL: 'https://images.gateway.test/', IMAGE_RETENTION_HOURS: '1' };
    const a = await startTestGateway(shared);
    const b = await startTestGateway(shared);
    try {
      const { key } = await createKeyVia(a.api);
      const url = await generateUrl(a, key, 'shared bucket');
      expect(url.startsWith('https://images.gateway.test/images/img_')).toBe(true);
      const fromB = await b.api.send('get', pathOf(url));
      expect(fromB.status).toBe(200);
      expect(fromB.headers['content-type']).toBe('image/png');
      expect((await a.api.send('get', pathOf(url))).headers.etag).toBe(fromB.headers.etag);

      b.clock.advanceMs(HOUR_MS + 1000);
      expect(await b.gateway.images.sweep()).toBe(1);
      // A's clock has not moved: the URL is still in date, but the image is gone.
      const fromA = await a.api.send('get', pathOf(url));
      expect(fromA.status).toBe(410);
      expect(fromA.body.error.code).toBe('image_expired');
    } finally {
      await a.close();
      await b.close();
      await database.drop();
      await s3.close();
    }
  });
});

describe('GET /images/{image_id} (getImage) when the store cannot read the bytes', () => {
  it('503 image_storage_unavailable, not 410: the bytes may still be there', async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-unreadable-'));
    const t = await startTestGateway({ IMAGE_DIRECTORY: directory });
    try {
      const { key } = await t.createKey();
      const url = await generateUrl(t, key);
      expect((await t.api.send('get', pathOf(url))).status).toBe(200);
      // A link to itself where the file was: opening it fails with ELOOP, which is no "missing".
      const id = new URL(url).pathname.split('/').pop()!;
      const file = path.join(directory, id.slice(-2), id);
      fs.rmSync(file);
      fs.symlinkSync(file, file);
      const res = await t.api.send('get', pathOf(url));
      expect([res.status, res.body.error.code]).toEqual([503, 'image_storage_unavailable']);
    } finally {
      await t.close();
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});
