import request from 'supertest';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { startArkGateway } from '../helpers/ark-gateway';
import { SpecResponses } from '../helpers/spec-responses';
import { type TestGateway, localRequest } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';
import { until } from '../helpers/until';

/**
 * The generation core's outcomes as the OpenAI-shaped operations and the internal one answer them, one
 * describe per operation (generateImage's are in generateImage.test.ts and idempotency.test.ts): the
 * fake Ark holds, fails or answers late on a prompt token; bfl is configured nowhere.
 */
describe('generation outcomes on the OpenAI-shaped and internal operations', () => {
  let t: TestGateway;
  let ark: FakeImagesApi;
  let key: string;
  const spec = new SpecResponses('gateway');
  beforeAll(async () => {
    ({ t, ark } = await startArkGateway({ env: { PROVIDER_JIMENG_TIMEOUT_MS: '1000', PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5' } }));
    key = (await t.createKey({ allowed_providers: ['jimeng', 'bfl', 'local'] })).key;
  });
  afterAll(() => t.close());

  const upstreamSaw = (prompt: string) => until(() => ark.requests.some((r) => r.prompt === prompt), `${prompt} upstream`);

  describe('POST /v1/images/generations (createImageOpenAI)', () => {
    const generate = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
      t.api.send('post', '/v1/images/generations', { body, headers: { Authorization: `Bearer ${key}`, ...headers } });

    it('409 idempotency_key_in_use while the first is running, 422 idempotency_key_reused for another body', async () => {
      const body = { prompt: 'openai held [hold:gen]', model: 'jimeng-4.5' };
      const first = generate(body, { 'Idempotency-Key': 'openai-1' });
      await upstreamSaw(body.prompt);
      const second = await generate(body, { 'Idempotency-Key': 'openai-1' });
      expect([second.status, second.body.error.code]).toEqual([409, 'idempotency_key_in_use']);
      ark.releaseHeld('gen');
      expect((await first).status).toBe(200);
      const other = await generate({ ...body, prompt: 'another' }, { 'Idempotency-Key': 'openai-1' });
      expect([other.status, other.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    });

    it('503 provider_unavailable for a provider configured nowhere; 504 provider_timeout past its deadline', async () => {
      const unconfigured = await generate({ prompt: 'p', model: 'flux-pro-1.1' });
      expect([unconfigured.status, unconfigured.body.error.code]).toEqual([503, 'provider_unavailable']);
      const late = await generate({ prompt: 'too late [slow:3000]', model: 'jimeng-4.5' });
      expect([late.status, late.body.error.code]).toEqual([504, 'provider_timeout']);
    });
  });

  describe('POST /v1/images/edits (editImageOpenAI)', () => {
    const edit = async (apiKey: string, fields: Record<string, string>, headers: Record<string, string> = {}) => {
      let req = request(t.gateway.url).post('/v1/images/edits').set('Authorization', `Bearer ${apiKey}`);
      for (const [name, value] of Object.entries(headers)) req = req.set(name, value);
      for (const [name, value] of Object.entries({ size: '2048x2048', ...fields })) req = req.field(name, value);
      const res = await req.attach('image', testPng(16, 16), 'a.png');
      const problem = spec.check('post', '/v1/images/edits', res);
      if (problem) throw new Error(`Response does not match the spec: ${problem}\n${res.status} ${res.text.slice(0, 500)}`);
      return res;
    };
    const local = { model: 'local-1', size: '32x32' };

    it('402 quota_exceeded past the credits; 403 for a provider the key may not use; 429 rate_limited past the rpm', async () => {
      const { key: small } = await t.createKey({ credits_quota: 1 });
      expect((await edit(small, { prompt: 'one', ...local })).status).toBe(200);
      const quota = await edit(small, { prompt: 'two', ...local });
      expect([quota.status, quota.body.error.code]).toEqual([402, 'quota_exceeded']);
      const forbidden = await edit(small, { prompt: 'three', model: 'jimeng-4.5' });
      expect([forbidden.status, forbidden.body.error.code]).toEqual([403, 'provider_not_allowed']);
      const { key: slow } = await t.createKey({ rate_limit_rpm: 1 });
      expect((await edit(slow, { prompt: 'one', ...local })).status).toBe(200);
      const limited = await edit(slow, { prompt: 'two', ...local });
      expect([limited.status, limited.body.error.code]).toEqual([429, 'rate_limited']);
    });

    it('409 idempotency_key_in_use while the first is running', async () => {
      const fields = { prompt: 'edit held [hold:edit]', model: 'jimeng-4.5' };
      const first = edit(key, fields, { 'Idempotency-Key': 'edit-1' });
      await upstreamSaw(fields.prompt);
      const second = await edit(key, fields, { 'Idempotency-Key': 'edit-1' });
      expect([second.status, second.body.error.code]).toEqual([409, 'idempotency_key_in_use']);
      ark.releaseHeld('edit');
      expect((await first).status).toBe(200);
    });

    it('502 provider_error when the upstream fails; 503 for a provider configured nowhere; 504 past the deadline', async () => {
      const failed = await edit(key, { prompt: 'fails [error:InvalidParameter:400]', model: 'jimeng-4.5' });
      expect([failed.status, failed.body.error.code]).toEqual([502, 'provider_error']);
      const unconfigured = await edit(key, { prompt: 'p', model: 'flux-kontext-pro', size: '1024x1024' });
      expect([unconfigured.status, unconfigured.body.error.code]).toEqual([503, 'provider_unavailable']);
      const late = await edit(key, { prompt: 'too late [slow:3000]', model: 'jimeng-4.5' });
      expect([late.status, late.body.error.code]).toEqual([504, 'provider_timeout']);
    });
  });

  describe('POST /api/v1/creative/images/generations (createGeneration)', () => {
    it('422 image_input_unreachable for an https input at a private address; 504 provider_timeout past the deadline', async () => {
      const unreachable = await t.internal.service('post', '/api/v1/creative/images/generations', localRequest({ images: ['https://127.0.0.1/a.png'] }));
      expect([unreachable.status, unreachable.body.error.code]).toEqual([422, 'image_input_unreachable']);
      const late = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'too late [slow:3000]', model: 'jimeng-4.5' });
      expect([late.status, late.body.error.code]).toEqual([504, 'provider_timeout']);
    });
  });
});
