import type { ImageEditParamsBase, ImageGenerateParamsBase } from 'openai/resources/images';
import { ApiError } from '../../src/errors/api-error';
import { ImagesApiClient } from '../../src/providers/images-api/images-api-client';
import { IMAGES_API_ERRORS } from '../../src/providers/images-api/images-api.descriptor';
import { checkQuality } from '../../src/config/price-table';
import { OPENAI_IMAGE_MODELS, openaiImageModel, upstreamPrice } from '../../src/providers/openai/models';
import { creditPriceOf, DEFAULT_CONVERSION, priceEntry, type PricedEntry } from '../../src/pricing/catalog-prices';
import { costOf, wholeCredits } from '../../src/pricing/meters';
import { OpenAIImagesClient } from '../../src/providers/openai/openai-images-client';
import type { ProviderInputImage, ProviderRequest } from '../../src/providers/provider';
import { UpstreamError } from '../../src/providers/upstream-errors';
import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { testPng } from '../helpers/test-images';

/**
 * The first-class OpenAI Images client against a fake that speaks OpenAI's wire format and refuses what
 * OpenAI refuses (real HTTP through the gateway's upstream hop). Field names and values from the official
 * `openai` Node SDK (node_modules/openai/resources/images.d.ts).
 */
describe('OpenAI Images client (gpt-image-1, gpt-image-1-mini, gpt-image-1.5, dall-e-3) against the fake OpenAI', () => {
  let fake: FakeOpenAIImages;
  let client: OpenAIImagesClient;

  beforeAll(async () => {
    fake = await startFakeOpenAIImages({ apiKey: 'sk-openai-test' });
    client = new OpenAIImagesClient({ provider: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'sk-openai-test' });
  });
  afterAll(() => fake.close());

  const request = (overrides: Partial<ProviderRequest>): ProviderRequest => ({
    prompt: 'a lighthouse at dawn',
    upstreamModel: 'gpt-image-1',
    n: 1,
    width: 1024,
    height: 1024,
    responseFormat: 'url',
    ...overrides,
  });
  const signal = () => new AbortController().signal;
  /** What `promise` rejects with, checked to be a `kind`. */
  const thrown = async <T>(promise: Promise<unknown>, kind: new (...args: never[]) => T): Promise<T> => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(kind);
    return error as T;
  };
  const rejection = (promise: Promise<unknown>) => thrown(promise, UpstreamError);
  const refusal = (promise: Promise<unknown>) => thrown(promise, ApiError);
  const png = (width: number, height: number, alpha = false): ProviderInputImage => ({
    bytes: testPng(width, height, { alpha }),
    format: 'png',
    mimeType: 'image/png',
    width,
    height,
  });
  /** A JPEG header with a start-of-frame segment: what the upstream sniffs. */
  const jpeg = (width: number, height: number): ProviderInputImage => ({
    bytes: Buffer.from([
      0xff,
      0xd8,
      0xff,
      0xc0,
      0x00,
      0x11,
      0x08,
      height >> 8,
      height & 255,
      width >> 8,
      width & 255,
      3,
      1,
      0x22,
      0,
      2,
      0x11,
      1,
      3,
      0x11,
      1,
      0xff,
      0xd9,
    ]),
    format: 'jpeg',
    mimeType: 'image/jpeg',
    width,
    height,
  });
  const lastRequest = () => fake.requests[fake.requests.length - 1]!;

  describe('the model table against the official SDK types', () => {
    // Each list is typed by the SDK (openai 6.49.0, resources/images.d.ts): tsc fails when one names a
    // field or value the SDK does not have, or leaves one out.
    type GenerateParams = ImageGenerateParamsBase;
    type EditParams = ImageEditParamsBase;
    const generateFields: Record<keyof GenerateParams, true> = {
      prompt: true,
      background: true,
      model: true,
      moderation: true,
      n: true,
      output_compression: true,
      output_format: true,
      partial_images: true,
      quality: true,
      response_format: true,
      size: true,
      stream: true,
      style: true,
      user: true,
    };
    const editFields: Record<keyof EditParams, true> = {
      image: true,
      prompt: true,
      background: true,
      input_fidelity: true,
      mask: true,
      model: true,
      n: true,
      output_compression: true,
      output_format: true,
      partial_images: true,
      quality: true,
      response_format: true,
      size: true,
      stream: true,
      user: true,
    };
    const values: Record<string, readonly string[]> = {
      quality: Object.keys({ standard: true, hd: true, low: true, medium: true, high: true, auto: true } satisfies Record<
        NonNullable<GenerateParams['quality']>,
        true
      >),
      background: Object.keys({ transparent: true, opaque: true, auto: true } satisfies Record<NonNullable<GenerateParams['background']>, true>),
      output_format: Object.keys({ png: true, jpeg: true, webp: true } satisfies Record<NonNullable<GenerateParams['output_format']>, true>),
      moderation: Object.keys({ low: true, auto: true } satisfies Record<NonNullable<GenerateParams['moderation']>, true>),
      style: Object.keys({ vivid: true, natural: true } satisfies Record<NonNullable<GenerateParams['style']>, true>),
      input_fidelity: Object.keys({ high: true, low: true } satisfies Record<NonNullable<EditParams['input_fidelity']>, true>),
    };

    it('every option a model row sends is a field of that endpoint in the SDK, with values the SDK lists', () => {
      for (const row of OPENAI_IMAGE_MODELS) {
        for (const [field, rule] of Object.entries(row.image_options)) {
          const endpoints =
            rule.only === 'text' ? (['generations'] as const) : rule.only === 'inputs' ? (['edits'] as const) : (['generations', 'edits'] as const);
          // A model without input images has no edits at all.
          for (const endpoint of endpoints.filter((e) => e === 'generations' || row.inputs !== undefined)) {
            const fields = endpoint === 'generations' ? generateFields : editFields;
            expect([row.model, endpoint, field, field in fields]).toEqual([row.model, endpoint, field, true]);
          }
          if ('values' in rule) expect(values[field]).toEqual(expect.arrayContaining([...rule.values]));
        }
      }
    });
  });

  describe("OpenAI's per-image prices as the model's upstream price, in credits at one credit per cent (CREDITS_PER_USD = 100)", () => {
    const priced = (model: string) =>
      priceEntry<PricedEntry>({ model, credits_per_image: 0, default_size: '1024x1024', price: upstreamPrice(openaiImageModel(model)!) }, DEFAULT_CONVERSION);
    const price = (model: string, size: string, quality?: string) => {
      const [width, height] = size.split('x').map(Number) as [number, number];
      return wholeCredits(costOf(creditPriceOf(priced(model)), { images: [{ width, height }], quality, calls: 1 }));
    };

    it('by size and quality, as OpenAI prices them, each rounded up to a whole credit; no quality (or auto) at the dearest quality', () => {
      expect([price('gpt-image-1', '1024x1024', 'low'), price('gpt-image-1', '1536x1024', 'medium'), price('gpt-image-1', '1024x1536', 'high')]).toEqual([
        2, 7, 25,
      ]);
      expect([price('gpt-image-1-mini', '1024x1024', 'low'), price('gpt-image-1-mini', '1024x1536', 'high')]).toEqual([1, 6]);
      expect([price('gpt-image-1.5', '1024x1024'), price('gpt-image-1.5', '1536x1024', 'auto')]).toEqual([14, 20]);
      expect([price('dall-e-3', '1024x1024', 'standard'), price('dall-e-3', '1792x1024', 'hd'), price('dall-e-3', '1024x1792')]).toEqual([4, 12, 12]);
    });

    it('publishes the same prices as a per-image table, and the dearest default-size image as credits_per_image', () => {
      const entry = priced('gpt-image-1');
      expect(entry.credits_per_image).toBe(17);
      expect(entry.price_table).toEqual(
        expect.arrayContaining([
          { quality: 'low', max_pixels: 1024 * 1024, credits: 2 },
          { max_pixels: 1536 * 1024, credits: 25 },
        ]),
      );
    });

    it('a quality the model does not price is refused (gpt-image-1 has no hd, dall-e-3 no low)', () => {
      expect(() => checkQuality(priced('gpt-image-1'), 'hd')).toThrow(ApiError);
      expect(() => checkQuality(priced('dall-e-3'), 'low')).toThrow(ApiError);
      expect(() => checkQuality(priced('gpt-image-1'), 'auto')).not.toThrow();
    });
  });

  describe('generations', () => {
    it('GPT image: never response_format nor seed; n in one call; documented options passed through, the client over the catalog', async () => {
      const images = await client.generate(
        request({
          prompt: 'two kites over a dune',
          n: 2,
          width: 1536,
          height: 1024,
          seed: 42,
          responseFormat: 'url',
          upstreamOptions: { quality: 'low', moderation: 'low', output_format: 'webp', seed: 7, response_format: 'url', watermark: false },
          quality: 'high',
          imageOptions: { background: 'opaque', output_compression: 80 },
        }),
        signal(),
      );
      expect(lastRequest()).toEqual({
        endpoint: 'generations',
        contentType: 'application/json',
        files: [],
        fields: {
          model: 'gpt-image-1',
          prompt: 'two kites over a dune',
          n: 2,
          size: '1536x1024',
          quality: 'high',
          moderation: 'low',
          output_format: 'webp',
          background: 'opaque',
          output_compression: 80,
        },
      });
      expect(images).toHaveLength(2);
      expect(images[0]).toMatchObject({ b64Json: expect.stringMatching(/^iVBOR/), width: 1536, height: 1024 });
      expect(images[0]!.url).toBeUndefined();
    });

    it('the usage tokens of a call are surfaced once, on its first image (their sum is what OpenAI bills)', async () => {
      const images = await client.generate(request({ prompt: 'three small words', n: 3, upstreamModel: 'gpt-image-1.5' }), signal());
      expect(images.map((image) => image.usage)).toEqual([
        { inputTokens: 3, outputTokens: 816, totalTokens: 819, inputImageTokens: 0, inputTextTokens: 3, outputImageTokens: 816, outputTextTokens: 0 },
        undefined,
        undefined,
      ]);
    });

    it('dall-e-3: one image per call (n calls of n=1), asked for b64_json; its quality and style sent, GPT-only options not', async () => {
      const before = fake.requests.length;
      const images = await client.generate(
        request({
          prompt: 'a fox in the snow',
          upstreamModel: 'dall-e-3',
          n: 2,
          width: 1792,
          height: 1024,
          quality: 'hd',
          imageOptions: { style: 'natural', background: 'transparent', moderation: 'low' },
        }),
        signal(),
      );
      const sent = fake.requests.slice(before);
      expect(sent.map((r) => r.fields)).toEqual([
        { model: 'dall-e-3', prompt: 'a fox in the snow', n: 1, size: '1792x1024', quality: 'hd', style: 'natural', response_format: 'b64_json' },
        { model: 'dall-e-3', prompt: 'a fox in the snow', n: 1, size: '1792x1024', quality: 'hd', style: 'natural', response_format: 'b64_json' },
      ]);
      expect(images).toHaveLength(2);
      expect(images.every((image) => image.b64Json !== undefined && image.width === 1792 && image.height === 1024)).toBe(true);
    });

    it.each([
      ['gpt-image-1', 1792, 1024],
      ['gpt-image-1-mini', 1024, 1792],
      ['dall-e-3', 1536, 1024],
      ['gpt-image-1.5', 1100, 1100],
    ])("a size outside %s's enumerated set (%sx%s) is refused on `size` before anything is sent", async (model, width, height) => {
      const before = fake.requests.length;
      const error = await refusal(client.generate(request({ upstreamModel: model, width, height }), signal()));
      expect(error).toMatchObject({ code: 'invalid_request', param: 'size' });
      expect(fake.requests.length).toBe(before);
    });

    it('a documented option with a value the model does not take is refused on that field before sending; transparent needs png or webp', async () => {
      const before = fake.requests.length;
      expect(await refusal(client.generate(request({ quality: 'hd' }), signal()))).toMatchObject({ code: 'invalid_request', param: 'quality' });
      expect(await refusal(client.generate(request({ imageOptions: { output_compression: 101 } }), signal()))).toMatchObject({
        code: 'invalid_request',
        param: 'output_compression',
      });
      expect(await refusal(client.generate(request({ imageOptions: { background: 'transparent', output_format: 'jpeg' } }), signal()))).toMatchObject({
        code: 'invalid_request',
        param: 'background',
      });
      expect(fake.requests.length).toBe(before);
    });
  });

  describe('edits: the real multipart /images/edits', () => {
    it('input images as image[] file parts in order, the mask as a PNG part, text fields (UTF-8, line breaks kept); no moderation (edits do not take it)', async () => {
      const first = png(64, 64);
      const second = jpeg(48, 32);
      const mask = png(64, 64, true);
      const images = await client.generate(
        request({
          prompt: 'put a hat on it — 帽子\r\nplease',
          n: 2,
          width: 1024,
          height: 1536,
          inputImages: [first, second],
          mask,
          upstreamOptions: { moderation: 'low', input_fidelity: 'high' },
          quality: 'medium',
        }),
        signal(),
      );
      const sent = lastRequest();
      expect(sent.endpoint).toBe('edits');
      expect(sent.contentType).toMatch(/^multipart\/form-data; boundary=/);
      expect(sent.fields).toEqual({
        model: 'gpt-image-1',
        prompt: 'put a hat on it — 帽子\r\nplease',
        n: '2',
        size: '1024x1536',
        quality: 'medium',
        input_fidelity: 'high',
      });
      expect(sent.files.map((f) => [f.field, f.filename, f.contentType, f.format, f.width, f.height])).toEqual([
        ['image[]', 'image-1.png', 'image/png', 'png', 64, 64],
        ['image[]', 'image-2.jpg', 'image/jpeg', 'jpeg', 48, 32],
        ['mask', 'mask.png', 'image/png', 'png', 64, 64],
      ]);
      expect(sent.files[0]!.bytes.equals(first.bytes)).toBe(true);
      expect(sent.files[2]!.bytes.equals(mask.bytes)).toBe(true);
      expect(images).toHaveLength(2);
      // Input images count as input image tokens.
      expect(images[0]!.usage).toMatchObject({ inputImageTokens: 646, inputTextTokens: 8, outputTokens: 544 });
    });

    it('gpt-image-1-mini takes no input_fidelity: not sent', async () => {
      await client.generate(request({ upstreamModel: 'gpt-image-1-mini', inputImages: [png(32, 32)], imageOptions: { input_fidelity: 'high' } }), signal());
      expect(lastRequest().fields).toEqual({ model: 'gpt-image-1-mini', prompt: 'a lighthouse at dawn', n: '1', size: '1024x1024' });
    });

    it('refused before sending: a mask of another size, a mask that is no PNG, inputs to dall-e-3, more than 16 images', async () => {
      const before = fake.requests.length;
      expect(await refusal(client.generate(request({ inputImages: [png(64, 64)], mask: png(32, 32, true) }), signal()))).toMatchObject({
        code: 'invalid_request',
        param: 'mask',
      });
      expect(await refusal(client.generate(request({ inputImages: [jpeg(64, 64)], mask: jpeg(64, 64) }), signal()))).toMatchObject({
        code: 'invalid_request',
        param: 'mask',
      });
      expect(await refusal(client.generate(request({ upstreamModel: 'dall-e-3', inputImages: [png(64, 64)] }), signal()))).toMatchObject({
        code: 'invalid_request',
        param: 'image',
      });
      expect(await refusal(client.generate(request({ inputImages: Array.from({ length: 17 }, () => png(8, 8)) }), signal()))).toMatchObject({
        code: 'invalid_request',
        param: 'image',
      });
      expect(fake.requests.length).toBe(before);
    });
  });

  describe('the error table', () => {
    it('moderation_blocked (GPT image) and content_policy_violation (dall-e-3) are the client content: never counted against the channel', async () => {
      for (const [model, code] of [
        ['gpt-image-1', 'moderation_blocked'],
        ['dall-e-3', 'content_policy_violation'],
      ] as const) {
        const error = await rejection(client.generate(request({ upstreamModel: model, prompt: `a picture [fail:${code}]` }), signal()));
        expect(error.code).toBe('content_policy_violation');
        expect(error.countsAgainstProvider).toBe(false);
        expect(error.traits.accountProblem).toBeUndefined();
      }
    });

    it.each(['insufficient_quota', 'billing_hard_limit_reached'])(
      '%s is the account problem: safe elsewhere, not retried, the channel disabled',
      async (code) => {
        const error = await rejection(client.generate(request({ prompt: `a picture [fail:${code}]` }), signal()));
        expect(error).toMatchObject({ code: 'provider_error', retryable: false });
        expect(error.traits).toMatchObject({ safeElsewhere: true, accountProblem: expect.stringContaining(code) });
      },
    );

    it('a wrong key (401 invalid_api_key) is the account problem, with its status', async () => {
      const wrong = new OpenAIImagesClient({ provider: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'sk-revoked' });
      const error = await rejection(wrong.generate(request({}), signal()));
      expect(error).toMatchObject({ code: 'provider_error', retryable: false });
      expect(error.traits).toMatchObject({ safeElsewhere: true, statusCode: 401, accountProblem: expect.stringContaining('invalid_api_key') });
    });

    it('rate_limit_exceeded (429 without insufficient_quota) is busy, with its Retry-After', async () => {
      const error = await rejection(client.generate(request({ prompt: 'a picture [fail:rate_limit_exceeded]' }), signal()));
      expect(error).toMatchObject({ code: 'provider_busy', retryable: true });
      expect(error.traits).toMatchObject({ safeElsewhere: true, retryAfterMs: 7000 });
      expect(error.traits.accountProblem).toBeUndefined();
    });

    it("model_not_found (404: no such model on this account) is the channel's configuration: safe elsewhere, not counted against its breaker, not an account problem", async () => {
      const error = await rejection(client.generate(request({ prompt: 'a picture [fail:model_not_found]' }), signal()));
      expect(error).toMatchObject({ code: 'provider_error', retryable: false });
      expect(error.traits).toMatchObject({ safeElsewhere: true, configurationProblem: expect.stringContaining('model_not_found') });
      expect(error.traits.accountProblem).toBeUndefined();
      expect(error.countsAgainstProvider).toBe(false);
    });

    it('5xx is a refusal, safe elsewhere; 504 is not (the upstream may have made the images)', async () => {
      const refused = await rejection(client.generate(request({ prompt: 'a picture [fail:server_error]' }), signal()));
      expect(refused).toMatchObject({ code: 'provider_error' });
      expect(refused.traits).toMatchObject({ safeElsewhere: true });
      const unknown = await rejection(client.generate(request({ prompt: 'a picture [fail:gateway_timeout]' }), signal()));
      expect(unknown).toMatchObject({ code: 'provider_error' });
      expect(unknown.traits.safeElsewhere).toBe(false);
    });

    it('another 400 is an invalid request naming the upstream param, not counted against the channel', async () => {
      const error = await rejection(client.generate(request({ prompt: 'a picture [fail:invalid_value]' }), signal()));
      expect(error).toMatchObject({ code: 'invalid_request', param: 'prompt' });
      expect(error.countsAgainstProvider).toBe(false);
      expect(error.traits.safeElsewhere).toBe(false);
    });

    it('goes through the upstream hop: a channel limited to public addresses does not reach a loopback OpenAI', async () => {
      const guarded = new OpenAIImagesClient({ provider: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'sk-openai-test', publicOnly: true });
      const before = fake.requests.length;
      const error = await rejection(guarded.generate(request({}), signal()));
      expect(error.traits.safeElsewhere).toBe(true);
      expect(fake.requests.length).toBe(before);
    });
  });

  describe('the fake refuses what OpenAI refuses', () => {
    const post = (path: string, body: unknown, headers: Record<string, string> = { authorization: 'Bearer sk-openai-test' }) =>
      fetch(`${fake.url}/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

    it('response_format and seed on a GPT image model: 400 unknown_parameter naming the field (what the generic client sends)', async () => {
      for (const field of ['response_format', 'seed']) {
        const res = await post('/images/generations', { model: 'gpt-image-1', prompt: 'x', [field]: field === 'seed' ? 1 : 'url' });
        expect(res.status).toBe(400);
        expect(await res.json()).toEqual({
          error: { message: `Unknown parameter: '${field}'.`, type: 'invalid_request_error', param: field, code: 'unknown_parameter' },
        });
      }
      // The OpenAI-compatible client (for compatible servers) sends response_format: it is no way to reach OpenAI's GPT image models.
      const generic = new ImagesApiClient({
        provider: 'openai',
        baseUrl: `${fake.url}/v1`,
        apiKey: 'sk-openai-test',
        oneImagePerCall: false,
        models: [],
        errors: IMAGES_API_ERRORS,
      });
      const error = await rejection(generic.generate(request({}), signal()));
      expect(error.message).toContain('response_format');
    });

    it('a size outside the model set, and n above 1 on dall-e-3: 400 invalid_value', async () => {
      const size = await post('/images/generations', { model: 'dall-e-3', prompt: 'x', size: '1536x1024' });
      expect(size.status).toBe(400);
      expect(await size.json()).toMatchObject({ error: { param: 'size', code: 'invalid_value', type: 'invalid_request_error' } });
      const n = await post('/images/generations', { model: 'dall-e-3', prompt: 'x', n: 2 });
      expect(await n.json()).toMatchObject({ error: { param: 'n', code: 'invalid_value' } });
    });

    it('no key: 401 in OpenAI error shape, without a code', async () => {
      const res = await post('/images/generations', { model: 'gpt-image-1', prompt: 'x' }, {});
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: { message: expect.stringContaining("You didn't provide an API key"), type: 'invalid_request_error', param: null, code: null },
      });
    });

    it('edits: a mask without alpha, or an edit sent as JSON, is refused', async () => {
      const form = new FormData();
      form.append('model', 'gpt-image-1');
      form.append('prompt', 'x');
      form.append('image[]', new Blob([testPng(16, 16)], { type: 'image/png' }), 'a.png');
      form.append('mask', new Blob([testPng(16, 16)], { type: 'image/png' }), 'mask.png');
      const noAlpha = await fetch(`${fake.url}/v1/images/edits`, { method: 'POST', headers: { authorization: 'Bearer sk-openai-test' }, body: form });
      expect(noAlpha.status).toBe(400);
      expect(await noAlpha.json()).toMatchObject({ error: { param: 'mask', message: expect.stringContaining('alpha') } });
      const json = await post('/images/edits', { model: 'gpt-image-1', prompt: 'x', image: 'data:image/png;base64,AAAA' });
      expect(json.status).toBe(400);
    });
  });
});
