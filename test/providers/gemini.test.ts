import { GeminiClient, geminiError, versionedBase } from '../../src/providers/gemini/gemini-client';
import type { ProviderRequest } from '../../src/providers/provider';
import { UpstreamError } from '../../src/providers/upstream-errors';
import { type FakeGemini, startFakeGemini } from '../fakes/fake-gemini';
import { testPng } from '../helpers/test-images';

/** The Gemini image client against a fake speaking the Gemini API's wire format (test/fakes/fake-gemini.ts). */
const KEY = 'gemini-test-key-0001';

describe('Gemini client (generateContent with image output)', () => {
  let gemini: FakeGemini;
  let client: GeminiClient;

  beforeAll(async () => {
    gemini = await startFakeGemini({ apiKey: KEY });
    client = new GeminiClient({ provider: 'google', baseUrl: gemini.url, apiKey: KEY });
  });
  afterAll(() => gemini.close());

  const request = (over: Partial<ProviderRequest> = {}): ProviderRequest => ({
    prompt: 'a lighthouse',
    upstreamModel: 'gemini-2.5-flash-image',
    n: 1,
    width: 1344,
    height: 768,
    responseFormat: 'b64_json',
    ...over,
  });
  const run = (over: Partial<ProviderRequest> = {}) => client.generate(request(over), new AbortController().signal);
  const failure = async (over: Partial<ProviderRequest>) => {
    const error = await run(over).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UpstreamError);
    return error as UpstreamError;
  };

  it('sends the prompt as a text part and the size as an aspect ratio; no n, no seed; the image comes back as base64', async () => {
    const before = gemini.calls.length;
    const images = await run({ seed: 42 });
    expect(images).toEqual([{ b64Json: expect.any(String), width: 1344, height: 768 }]);
    expect(Buffer.from(images[0]!.b64Json!, 'base64').subarray(1, 4).toString()).toBe('PNG');
    const [call] = gemini.calls.slice(before);
    expect(call!.model).toBe('gemini-2.5-flash-image');
    expect(call!.apiKey).toBe(KEY);
    expect(call!.body).toEqual({
      contents: [{ role: 'user', parts: [{ text: 'a lighthouse' }] }],
      generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9' } },
    });
  });

  it('3 Pro (GA id and its -preview id): the size picks the aspect ratio and the size tier', async () => {
    const before = gemini.calls.length;
    await run({ upstreamModel: 'gemini-3-pro-image', width: 2752, height: 1536 });
    await run({ upstreamModel: 'gemini-3-pro-image-preview', width: 3392, height: 5056 });
    expect(gemini.calls[before]!.body.generationConfig).toEqual({ responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '2K' } });
    expect(gemini.calls[before + 1]!.body.generationConfig).toEqual({ responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '2:3', imageSize: '4K' } });
  });

  it('3.1 Flash: the extreme ratios (1:8 at 1K, 4:1 at 4K); a catalog family picks the table for an id it does not know', async () => {
    const before = gemini.calls.length;
    await run({ upstreamModel: 'gemini-3.1-flash-image', width: 384, height: 3072 });
    await run({ upstreamModel: 'gemini-3.1-flash-image-preview', width: 8192, height: 2048, upstreamFamily: 'gemini-3.1-flash-image' });
    expect(gemini.calls.slice(before).map((c) => (c.body.generationConfig as { imageConfig: unknown }).imageConfig)).toEqual([
      { aspectRatio: '1:8', imageSize: '1K' },
      { aspectRatio: '4:1', imageSize: '4K' },
    ]);
  });

  it('the base URL is the API root; /v1beta is added unless the base already names a version', () => {
    expect(versionedBase('https://generativelanguage.googleapis.com')).toBe('https://generativelanguage.googleapis.com/v1beta');
    expect(versionedBase('https://generativelanguage.googleapis.com/')).toBe('https://generativelanguage.googleapis.com/v1beta');
    expect(versionedBase('https://proxy.example/gemini/v1beta/')).toBe('https://proxy.example/gemini/v1beta');
    expect(versionedBase('https://proxy.example/v1')).toBe('https://proxy.example/v1');
  });

  it('n images are n calls, each one image', async () => {
    const before = gemini.calls.length;
    const images = await run({ n: 3 });
    expect(images).toHaveLength(3);
    expect(gemini.calls.length - before).toBe(3);
  });

  it('reference images travel as inline_data parts after the prompt', async () => {
    const png = testPng(32, 16);
    const before = gemini.calls.length;
    await run({ inputImages: [{ bytes: png, format: 'png', mimeType: 'image/png', width: 32, height: 16 }] });
    const call = gemini.calls[before]!;
    expect((call.body.contents as Array<{ parts: unknown[] }>)[0]!.parts).toEqual([
      { text: 'a lighthouse' },
      { inline_data: { mime_type: 'image/png', data: png.toString('base64') } },
    ]);
    expect(call.images[0]).toMatchObject({ format: 'png', width: 32, height: 16 });
  });

  it('a size the model does not make is refused before anything is sent', async () => {
    const before = gemini.calls.length;
    await expect(run({ width: 1024, height: 768 })).rejects.toMatchObject({ code: 'invalid_request', param: 'size' });
    await expect(run({ upstreamModel: 'gemini-2.5-flash-image', width: 2048, height: 2048 })).rejects.toMatchObject({ code: 'invalid_request' });
    // 1:8 is 3.1 Flash's only: 3 Pro does not make it.
    await expect(run({ upstreamModel: 'gemini-3-pro-image', width: 384, height: 3072 })).rejects.toMatchObject({ code: 'invalid_request' });
    expect(gemini.calls.length).toBe(before);
  });

  it("a blocked prompt and a SAFETY / PROHIBITED_CONTENT finish are the client's content, never the provider's fault", async () => {
    for (const prompt of ['x [block:SAFETY]', 'x [block:PROHIBITED_CONTENT]', 'x [finish:SAFETY]', 'x [finish:PROHIBITED_CONTENT]']) {
      const error = await failure({ prompt });
      expect(error.code).toBe('content_policy_violation');
      expect(error.countsAgainstProvider).toBe(false);
    }
  });

  it('IMAGE_SAFETY: the image was made and withheld (output_moderated)', async () => {
    const error = await failure({ prompt: 'x [finish:IMAGE_SAFETY]' });
    expect(error.code).toBe('output_moderated');
    expect(error.countsAgainstProvider).toBe(false);
  });

  it('RESOURCE_EXHAUSTED of a per-minute quota is busy, with the RetryInfo delay', async () => {
    const error = await failure({ prompt: 'x [busy]' });
    expect(error).toMatchObject({ code: 'provider_busy', retryable: true });
    expect(error.traits.retryAfterMs).toBe(7000);
  });

  it("RESOURCE_EXHAUSTED of a per-day quota (its QuotaFailure's quotaId) is the account's problem until the reset: not retried, the channel disabled", async () => {
    const error = await failure({ prompt: 'x [quota-day]' });
    expect(error).toMatchObject({ code: 'provider_error', retryable: false });
    expect(error.traits).toMatchObject({ safeElsewhere: true, statusCode: 429 });
    expect(error.traits.accountProblem).toContain('per-day quota');
    expect(error.traits.accountProblem).toContain('midnight Pacific time');
  });

  it("a thinking model's thought parts (interim drafts) are skipped: the final image is the one returned", async () => {
    const images = await run({ upstreamModel: 'gemini-3-pro-image', width: 1376, height: 768 });
    expect(images).toHaveLength(1);
    const bytes = Buffer.from(images[0]!.b64Json!, 'base64');
    // The final image's own header: 1376 x 768 (the drafts are smaller).
    expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20)]).toEqual([1376, 768]);
  });

  it('an answer whose only images are thoughts has no image: a failed (billed) call', async () => {
    const error = await failure({ upstreamModel: 'gemini-3-pro-image', width: 1024, height: 1024, prompt: 'only thoughts [textonly]' });
    expect(error).toMatchObject({ code: 'provider_error', retryable: false });
    expect(error.message).toContain('no image');
  });

  it("an invalid key (400 API_KEY_INVALID) and PERMISSION_DENIED are the account's problem, safe to send elsewhere", async () => {
    const wrong = new GeminiClient({ provider: 'google', baseUrl: gemini.url, apiKey: 'not-the-key' });
    const error = await wrong.generate(request(), new AbortController().signal).then(
      () => undefined,
      (e: unknown) => e as UpstreamError,
    );
    expect(error).toMatchObject({ code: 'provider_error' });
    expect(error!.traits).toMatchObject({ safeElsewhere: true, statusCode: 400 });
    expect(error!.traits.accountProblem).toContain('API key not valid');
    expect(error!.message).not.toContain('not-the-key');
    const denied = await failure({ prompt: 'x [error:PERMISSION_DENIED:403]' });
    expect(denied.traits.accountProblem).toContain('PERMISSION_DENIED');
  });

  it('an unknown model (404) is refused before anything ran: safe elsewhere; INTERNAL 500 too; DEADLINE_EXCEEDED 504 is not', async () => {
    const notFound = geminiError('google', 404, { error: { code: 404, status: 'NOT_FOUND', message: 'models/x is not found' } }, undefined);
    expect(notFound).toMatchObject({ code: 'provider_error' });
    expect(notFound.traits).toMatchObject({ safeElsewhere: true, accountProblem: undefined });
    const internal = await failure({ prompt: 'x [error:INTERNAL:500]' });
    expect(internal.traits.safeElsewhere).toBe(true);
    const deadline = await failure({ prompt: 'x [error:DEADLINE_EXCEEDED:504]' });
    expect(deadline.traits.safeElsewhere).toBe(false);
  });

  it('a text-only answer (billed, no image) fails without being sent elsewhere', async () => {
    const error = await failure({ prompt: 'x [textonly]' });
    expect(error.code).toBe('provider_error');
    expect(error.traits.safeElsewhere).toBe(false);
    expect(error.message).toContain('no image');
  });
});
