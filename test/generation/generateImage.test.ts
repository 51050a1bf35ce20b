import { inflateSync } from 'node:zlib';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/** Decodes our PNGs far enough to prove they are real images of the stated size. */
function pngSize(b64: string): { width: number; height: number; pixels: number } {
  const png = Buffer.from(b64, 'base64');
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const idatLength = png.readUInt32BE(33);
  const raw = inflateSync(png.subarray(41, 41 + idatLength));
  return { width, height, pixels: (raw.length - height) / 3 };
}

describe('POST /images/generate (generateImage)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  describe('success', () => {
    it('renders real PNGs with the local provider and charges credits', async () => {
      const { key } = await t.createKey({ credits_quota: 10 });
      const res = await t.api.client(key, localRequest({ n: 2, size: '48x32', seed: 7 }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'local-1', provider: 'local', usage: { images: 2, credits_charged: 2, credits_remaining: 8 } });
      expect(res.body.id).toMatch(/^gen_/);
      expect(res.body.data).toHaveLength(2);
      expect(pngSize(res.body.data[0].b64_json)).toEqual({ width: 48, height: 32, pixels: 48 * 32 });
      expect(res.body.data[0].b64_json).not.toEqual(res.body.data[1].b64_json);
    });

    it('is deterministic for the same prompt and seed', async () => {
      const { key } = await t.createKey();
      const a = await t.api.client(key, localRequest({ seed: 99 }));
      const b = await t.api.client(key, localRequest({ seed: 99 }));
      const c = await t.api.client(key, localRequest({ seed: 100 }));
      expect(a.body.data[0].b64_json).toEqual(b.body.data[0].b64_json);
      expect(a.body.data[0].b64_json).not.toEqual(c.body.data[0].b64_json);
    });

    it("answers the gateway's own signed image URLs by default and uses the model default size", async () => {
      const { key } = await t.createKey();
      const res = await t.api.client(key, { prompt: 'default format', model: 'local-1' });
      expect(res.status).toBe(200);
      expect(res.body.data[0].url).toMatch(new RegExp(`^${t.gateway.url}/images/img_[0-9A-Za-z]+\\?expires=\\d+&signature=[\\w-]{43}$`));
      expect(res.body.data[0].b64_json).toBeUndefined();
      expect(res.body.data[0]).toMatchObject({ width: 256, height: 256 });
    });

    it('sends the IETF and X- rate limit headers', async () => {
      const { key } = await t.createKey({ rate_limit_rpm: 5 });
      const res = await t.api.client(key, localRequest());
      expect(res.headers['ratelimit-policy']).toBe('"rpm";q=5;w=60');
      expect(res.headers['ratelimit']).toMatch(/^"rpm";r=4;t=\d+$/);
      expect(res.headers['x-ratelimit-limit']).toBe('5');
      expect(res.headers['x-ratelimit-remaining']).toBe('4');
      expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(0);
    });

    it('every answer carries the rate-limit state: as counted after the count (503, 200, 202, 402), looked up before it (404)', async () => {
      const { key } = await t.createKey({ rate_limit_rpm: 9, credits_quota: 4, allowed_providers: ['local', 'jimeng'] });
      const answer = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
        const res = await t.api.send('post', '/images/generate', { body, headers: { Authorization: `Bearer ${key}`, ...headers } });
        return [res.status, res.headers['ratelimit-policy'], res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining']];
      };
      const policy = '"rpm";q=9;w=60';
      expect(await answer({ prompt: 'a cat', model: 'jimeng-4.5' })).toEqual([503, policy, '9', '8']);
      expect(await answer(localRequest())).toEqual([200, policy, '9', '7']);
      expect(await answer(localRequest({ model: 'nope' }))).toEqual([404, policy, '9', '7']);
      expect(await answer(localRequest(), { Prefer: 'respond-async' })).toEqual([202, policy, '9', '6']);
      expect(await answer(localRequest({ n: 4 }))).toEqual([402, policy, '9', '5']);
    });

    it('records the usage row and last_used_at', async () => {
      const { id, key } = await t.createKey();
      const res = await t.api.client(key, localRequest({ n: 3 }));
      const row = await t.gateway.database.db.selectFrom('generations').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
      expect(row).toMatchObject({ key_id: id, model: 'local-1', provider: 'local', images: 3, credits: 3, status: 'succeeded', error_code: null });
      expect(row.latency_ms).toBeGreaterThanOrEqual(0);
      const record = await t.api.admin('get', `/admin/keys/${id}`);
      expect(record.body.last_used_at).not.toBeNull();
      expect(record.body.credits_used).toBe(3);
    });
  });

  describe('auth', () => {
    it('401 missing_api_key without Authorization', async () => {
      const res = await t.api.send('post', '/images/generate', { body: localRequest() });
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ code: 'missing_api_key', type: 'authentication_error', param: null });
      expect(res.body.error.request_id).toBe(res.headers['x-request-id']);
    });

    it('401 invalid_api_key for a malformed key, a bad checksum and an unknown key', async () => {
      const { key } = await t.createKey();
      const badChecksum = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
      for (const candidate of ['nonsense', 'hyai_short', badChecksum]) {
        const res = await t.api.client(candidate, localRequest());
        expect(res.status).toBe(401);
        expect(res.body.error.code).toBe('invalid_api_key');
      }
      const other = await t.createKey();
      await t.gateway.database.db.deleteFrom('api_keys').where('id', '=', other.id).execute();
      const unknown = await t.api.client(other.key, localRequest());
      expect(unknown.body.error.code).toBe('invalid_api_key');
    });

    it('401 key_disabled once the key is disabled, from the next request on', async () => {
      const { id, key } = await t.createKey();
      expect((await t.api.client(key, localRequest())).status).toBe(200);
      await t.api.admin('delete', `/admin/keys/${id}`);
      const res = await t.api.client(key, localRequest());
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('key_disabled');
    });

    it('401 key_expired after expires_at', async () => {
      const { key } = await t.createKey({ expires_in_days: 1 });
      expect((await t.api.client(key, localRequest())).status).toBe(200);
      t.clock.advanceDays(1.01);
      const res = await t.api.client(key, localRequest());
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('key_expired');
    });

    it('never accepts the admin secret as a client key', async () => {
      const res = await t.api.send('post', '/images/generate', {
        body: localRequest(),
        headers: { Authorization: 'Bearer test-admin-secret-0123456789' },
      });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
    });

    it('checks the key before the body', async () => {
      const res = await t.api.client('nonsense', { nothing: true });
      expect(res.body.error.code).toBe('invalid_api_key');
    });
  });

  describe('errors', () => {
    it('400 invalid_request names the field at fault', async () => {
      const { key } = await t.createKey();
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ model: 'local-1' }, 'prompt'],
        [localRequest({ prompt: '' }), 'prompt'],
        [localRequest({ prompt: 'x'.repeat(4001) }), 'prompt'],
        [localRequest({ n: 5 }), 'n'],
        [localRequest({ n: 'two' }), 'n'],
        [localRequest({ size: '12' }), 'size'],
        [localRequest({ response_format: 'gif' }), 'response_format'],
        [localRequest({ surprise: 1 }), 'surprise'],
      ];
      for (const [body, param] of cases) {
        const res = await t.api.client(key, body);
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_request', type: 'invalid_request_error', param });
        expect(res.headers['x-ratelimit-limit']).toBe('1000');
      }
    });

    it('400 for malformed JSON and 415 for another content type', async () => {
      const { key } = await t.createKey();
      const auth = { Authorization: `Bearer ${key}` };
      const bad = await t.api.send('post', '/images/generate', { rawBody: '{"prompt":', headers: { ...auth, 'Content-Type': 'application/json' } });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid_request');
      const text = await t.api.send('post', '/images/generate', { rawBody: 'draw a cat', headers: { ...auth, 'Content-Type': 'text/plain' } });
      expect(text.status).toBe(415);
      expect(text.body.error.code).toBe('unsupported_media_type');
      // No operation takes uploads: a multipart body is refused the same way.
      const boundary = 'cgw-test-boundary';
      const multipart = await t.api.send('post', '/images/generate', {
        rawBody: `--${boundary}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\na cat\r\n--${boundary}--\r\n`,
        headers: { ...auth, 'Content-Type': `multipart/form-data; boundary=${boundary}` },
      });
      expect(multipart.status).toBe(415);
      expect(multipart.body.error.code).toBe('unsupported_media_type');
    });

    it('its body may pass BODY_LIMIT_BYTES (it carries image inputs), as may the OpenAI-compatible one: a 70 KB prompt reaches the validator on both; 413 is for bodies over 72 MiB (test/http/slow-bodies.test.ts)', async () => {
      const { key } = await t.createKey();
      for (const path of ['/images/generate', '/v1/images/generations']) {
        const res = await t.api.client(key, localRequest({ prompt: 'x'.repeat(70_000) }), path);
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'prompt' });
      }
    });

    it('404 model_not_found for an unknown model', async () => {
      const { key } = await t.createKey();
      const res = await t.api.client(key, localRequest({ model: 'dall-e-9' }));
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ code: 'model_not_found', param: 'model' });
      expect(res.body.error.message).toContain('local-1');
    });

    it('403 provider_not_allowed when the key does not list the provider', async () => {
      const { key } = await t.createKey({ allowed_providers: ['jimeng'] });
      const res = await t.api.client(key, localRequest());
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'provider_not_allowed', type: 'permission_error' });
    });

    it('429 rate_limited with Retry-After past the RPM, without charging', async () => {
      const { id, key } = await t.createKey({ rate_limit_rpm: 2 });
      expect((await t.api.client(key, localRequest())).status).toBe(200);
      expect((await t.api.client(key, localRequest())).status).toBe(200);
      const res = await t.api.client(key, localRequest());
      expect(res.status).toBe(429);
      expect(res.body.error).toMatchObject({ code: 'rate_limited', type: 'rate_limit_error' });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect(res.headers['x-ratelimit-remaining']).toBe('0');
      expect(await t.api.creditsUsed(id)).toBe(2);
      t.clock.advanceMs(61_000);
      expect((await t.api.client(key, localRequest())).status).toBe(200);
    });

    it('402 quota_exceeded with the reset time, without charging', async () => {
      const { id, key, record } = await t.createKey({ credits_quota: 2 });
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
      const res = await t.api.client(key, localRequest());
      expect(res.status).toBe(402);
      expect(res.body.error).toMatchObject({ code: 'quota_exceeded', type: 'quota_error', period_resets_at: record.period_resets_at });
      expect(res.body.error.message).toContain(record.period_resets_at as string);
      expect(await t.api.creditsUsed(id)).toBe(2);
    });

    it('a request for more credits than remain is refused whole', async () => {
      const { id, key } = await t.createKey({ credits_quota: 3 });
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(402);
      expect((await t.api.client(key, localRequest({ n: 1 }))).status).toBe(200);
      expect((await t.api.admin('get', `/admin/keys/${id}`)).body.credits_remaining).toBe(0);
    });

    it('503 provider_unavailable for jimeng until its adapter lands, credits released', async () => {
      const { id, key } = await t.createKey({ allowed_providers: ['jimeng'] });
      const res = await t.api.client(key, { prompt: 'a cat', model: 'jimeng-4.5' });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'provider_unavailable', type: 'provider_error' });
      expect(res.body.error.message).toMatch(/jimeng/);
      expect(await t.api.creditsUsed(id)).toBe(0);
      const row = await t.gateway.database.db.selectFrom('generations').selectAll().where('key_id', '=', id).executeTakeFirstOrThrow();
      expect(row).toMatchObject({ status: 'failed', error_code: 'provider_unavailable' });
    });

    it('400 when the local provider cannot render the size, credits released', async () => {
      const { id, key } = await t.createKey();
      const res = await t.api.client(key, localRequest({ size: '4096x4096' }));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
      expect(await t.api.creditsUsed(id)).toBe(0);
    });
  });
});
