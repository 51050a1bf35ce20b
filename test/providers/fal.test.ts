import { decodeHandle, encodeHandle, FalClient, inputReference } from '../../src/providers/fal/fal-client';
import type { ProviderRequest } from '../../src/providers/provider';
import { UpstreamError } from '../../src/providers/upstream-errors';
import { type FakeFal, startFakeFal } from '../fakes/fake-fal';
import { testPng } from '../helpers/test-images';

/** The fal queue client against a fake speaking fal's queue wire format (test/fakes/fake-fal.ts). */
const KEY = 'fal-key-id:fal-key-secret-0001';

describe('fal client (queue: submit, status_url, response_url, cancel_url)', () => {
  let fal: FakeFal;
  let client: FalClient;

  beforeAll(async () => {
    fal = await startFakeFal({ apiKey: KEY });
    client = new FalClient({ provider: 'fal', baseUrl: fal.url, apiKey: KEY, pollIntervalMs: 1 });
  });
  afterEach(() => {
    fal.onStatusPoll = undefined;
  });
  afterAll(() => fal.close());

  const request = (over: Partial<ProviderRequest> = {}): ProviderRequest => ({
    prompt: 'a lighthouse',
    upstreamModel: 'fal-ai/flux/dev',
    n: 1,
    width: 1024,
    height: 768,
    responseFormat: 'url',
    ...over,
  });
  const run = (over: Partial<ProviderRequest> = {}, signal = new AbortController().signal) => client.generate(request(over), signal);
  const failure = async (over: Partial<ProviderRequest>, on = client) => {
    const error = await on.generate(request(over), new AbortController().signal).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UpstreamError);
    return error as UpstreamError;
  };
  const png = testPng(32, 16);
  const input = (url?: string) => ({ bytes: png, format: 'png' as const, mimeType: 'image/png', width: 32, height: 16, ...(url ? { url } : {}) });

  it('FLUX.1 [dev]: one request for n images (num_images), the size as image_size, the seed; polled by the URLs fal answered', async () => {
    const before = fal.submits.length;
    const sent: string[] = [];
    const accepted: string[] = [];
    const images = await run({ n: 2, seed: 7, onRequestSent: () => sent.push('sent'), onTaskAccepted: async (handle) => void accepted.push(handle) });
    expect(fal.submits.length - before).toBe(1);
    const submit = fal.submits[before]!;
    expect(submit.app).toBe('fal-ai/flux/dev');
    expect(submit.body).toEqual({ prompt: 'a lighthouse', num_images: 2, image_size: { width: 1024, height: 768 }, seed: 7 });
    expect(sent).toEqual(['sent']);
    // The handle is what fal answered: its URLs name owner/app only (`fal-ai/flux`), never rebuilt from the app id.
    // Stored as the response URL alone (the journal's task_id holds 200 characters), giving back the same URLs.
    expect(accepted[0]).toBe(`${fal.url}/fal-ai/flux/requests/${submit.requestId}`);
    const handle = decodeHandle(accepted[0]!);
    expect(handle).toEqual({
      request_id: submit.requestId,
      status_url: `${fal.url}/fal-ai/flux/requests/${submit.requestId}/status`,
      response_url: `${fal.url}/fal-ai/flux/requests/${submit.requestId}`,
      cancel_url: `${fal.url}/fal-ai/flux/requests/${submit.requestId}/cancel`,
    });
    expect(fal.statusPolls.get(submit.requestId)).toBeGreaterThanOrEqual(3);
    expect(images).toEqual([
      { url: expect.stringMatching(new RegExp(`^${fal.url}/files/png-${submit.requestId}-0`)), width: 1024, height: 768 },
      { url: expect.stringMatching(new RegExp(`^${fal.url}/files/png-${submit.requestId}-1`)), width: 1024, height: 768 },
    ]);
    // The URLs serve the image bytes (fal's CDN): the gateway fetches them at once.
    const file = await fetch(images[0]!.url!);
    expect(file.headers.get('content-type')).toBe('image/png');
  });

  it('FLUX1.1 [pro]: the same fields on its own app', async () => {
    const before = fal.submits.length;
    const images = await run({ upstreamModel: 'fal-ai/flux-pro/v1.1', width: 1440, height: 1024 });
    expect(fal.submits[before]).toMatchObject({
      app: 'fal-ai/flux-pro/v1.1',
      body: { prompt: 'a lighthouse', num_images: 1, image_size: { width: 1440, height: 1024 } },
    });
    expect(images).toEqual([expect.objectContaining({ width: 1440, height: 1024 })]);
  });

  it('FLUX.1 Kontext [pro]: the reference image as image_url, the size as aspect_ratio; the size fal reports is the one recorded', async () => {
    const before = fal.submits.length;
    const images = await run({ upstreamModel: 'fal-ai/flux-pro/kontext', width: 1280, height: 720, inputImages: [input()] });
    const submit = fal.submits[before]!;
    expect(submit.body).toEqual({ prompt: 'a lighthouse', num_images: 1, aspect_ratio: '16:9', image_url: `data:image/png;base64,${png.toString('base64')}` });
    expect(submit.images[0]).toMatchObject({ via: 'data-uri', format: 'png', width: 32, height: 16 });
    expect(images).toEqual([expect.objectContaining({ width: 1392, height: 752 })]);
  });

  it("the gateway's signed URL only when fal can download it (https, a public address); else the bytes as a data URI", async () => {
    const dataUri = `data:image/png;base64,${png.toString('base64')}`;
    const cases: Array<[string, string]> = [
      ['https://gateway.example.com/images/img_1?expires=1&signature=s', 'https://gateway.example.com/images/img_1?expires=1&signature=s'],
      ['http://gateway.example.com/images/img_1?expires=1&signature=s', dataUri],
      ['https://localhost:8080/images/img_1', dataUri],
      ['https://127.0.0.1:8080/images/img_1', dataUri],
      ['https://10.0.0.5/images/img_1', dataUri],
      ['https://[::1]:8080/images/img_1', dataUri],
    ];
    expect(cases.map(([url]) => inputReference(input(url)))).toEqual(cases.map(([, sent]) => sent));
  });

  it("the gateway's loopback URL (a private install) is not sent: fal could not download it, and the request succeeds with the bytes inline", async () => {
    const before = fal.submits.length;
    const loopback = `${fal.url}/files/png-reference-32x16.png`;
    const images = await run({ upstreamModel: 'fal-ai/flux-pro/kontext', width: 1024, height: 1024, inputImages: [input(loopback)] });
    expect(fal.submits[before]!.body.image_url).toBe(`data:image/png;base64,${png.toString('base64')}`);
    expect(images).toEqual([expect.objectContaining({ width: 1024, height: 1024 })]);
  });

  it('Kontext without its one reference image, or at a size that is no documented ratio, is refused before anything is sent', async () => {
    const before = fal.submits.length;
    await expect(run({ upstreamModel: 'fal-ai/flux-pro/kontext', width: 1024, height: 1024 })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'images',
    });
    await expect(run({ upstreamModel: 'fal-ai/flux-pro/kontext', width: 1000, height: 1000, inputImages: [input()] })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'size',
    });
    expect(fal.submits.length).toBe(before);
  });

  it('a takeover resumes the request by its handle: it polls and reads the result, and never submits again', async () => {
    let handle: string | undefined;
    // The process that submitted dies right after recording the handle.
    await expect(
      run({
        prompt: 'taken over',
        onTaskAccepted: async (accepted) => {
          handle = accepted;
          throw new Error('process gone');
        },
      }),
    ).rejects.toThrow('process gone');
    const submits = fal.submits.length;
    const images = await run({ prompt: 'taken over', resumeTaskId: handle! });
    expect(fal.submits.length).toBe(submits);
    expect(images).toHaveLength(1);
    expect(fal.cancelCalls.filter((c) => c.requestId === decodeHandle(handle!).request_id)).toEqual([]);
  });

  it('an abort while the request is queued is forwarded to its cancel_url (PUT) before the abort is answered; the request never runs', async () => {
    const controller = new AbortController();
    const reason = new Error('canceled by the client');
    let requestId = '';
    fal.onStatusPoll = (id, status) => {
      if (id === requestId && status === 'IN_QUEUE') controller.abort(reason);
    };
    await expect(
      run({ prompt: 'cancel me [hold]', onTaskAccepted: async (handle) => void (requestId = decodeHandle(handle).request_id) }, controller.signal),
    ).rejects.toBe(reason);
    expect(fal.cancelled).toContain(requestId);
    expect(fal.cancelCalls).toContainEqual({ requestId, answered: 'CANCELLATION_REQUESTED' });
    expect(fal.made.filter((prompt) => prompt === 'cancel me [hold]')).toEqual([]);
  });

  it('an abort once the request runs is not forwarded (fal only removes queued requests)', async () => {
    const controller = new AbortController();
    let requestId = '';
    let running = 0;
    // The second IN_PROGRESS answer: the client has read the first one.
    fal.onStatusPoll = (id, status) => {
      if (id === requestId && status === 'IN_PROGRESS' && (running += 1) === 2) controller.abort(new Error('gone'));
    };
    await expect(
      run(
        { prompt: 'running [queued:0] [running:50]', onTaskAccepted: async (handle) => void (requestId = decodeHandle(handle).request_id) },
        controller.signal,
      ),
    ).rejects.toThrow('gone');
    expect(fal.cancelCalls.filter((c) => c.requestId === requestId)).toEqual([]);
  });

  it('a busy status answer (429) only delays the poll', async () => {
    expect(await run({ prompt: 'busy polls [status-busy:2]' })).toHaveLength(1);
  });

  it("a status_url on a host that is neither the account's nor fal's queue is never followed", async () => {
    const error = await failure({ prompt: 'redirected [foreign-status]' });
    expect(error.message).toContain('elsewhere.invalid');
    expect(error.traits.safeElsewhere).toBe(false);
    // A stored handle naming another host is refused the same way.
    const forged = encodeHandle({
      request_id: 'x',
      status_url: 'http://169.254.169.254/latest/status',
      response_url: `${fal.url}/a/b/requests/x`,
      cancel_url: `${fal.url}/a/b/requests/x/cancel`,
    });
    expect((await failure({ resumeTaskId: forged })).message).toContain('169.254.169.254');
  });

  it('fal bills each image it made; one more than asked for is not delivered', async () => {
    const billed: Array<[number, number]> = [];
    const images = await run({ prompt: 'generous [extra-image]', onBilled: (b, d) => void billed.push([b, d]) });
    expect(images).toHaveLength(1);
    expect(billed).toEqual([[2, 1]]);
  });

  describe('error table (src/providers/fal/fal-errors.ts): each family', () => {
    it("content_policy_violation (422) is the client's content, never the provider's fault", async () => {
      const error = await failure({ prompt: 'x [error:content_policy_violation:422]' });
      expect(error.code).toBe('content_policy_violation');
      expect(error.countsAgainstProvider).toBe(false);
    });

    it('has_nsfw_concepts: the app withheld a generated image (output_moderated)', async () => {
      const error = await failure({ prompt: 'x [nsfw]' });
      expect(error.code).toBe('output_moderated');
      expect(error.countsAgainstProvider).toBe(false);
    });

    it("401 (an unknown key) and 403 (a locked account) are the account's problem: safe elsewhere, the channel is disabled", async () => {
      const wrong = new FalClient({ provider: 'fal', baseUrl: fal.url, apiKey: 'other-id:not-the-secret', pollIntervalMs: 1 });
      const unknown = await failure({}, wrong);
      expect(unknown.traits).toMatchObject({ safeElsewhere: true, statusCode: 401 });
      expect(unknown.traits.accountProblem).toContain('No user found');
      expect(unknown.message).not.toContain('not-the-secret');
      const locked = await failure({ prompt: 'x [locked]' });
      expect(locked.traits).toMatchObject({ safeElsewhere: true, statusCode: 403 });
      expect(locked.traits.accountProblem).toContain('Exhausted balance');
    });

    it("404 (an app the account does not have) is the channel's configuration: safe elsewhere, not the provider's fault", async () => {
      const error = await failure({ upstreamModel: 'fal-ai/no-such-app' });
      expect(error.traits.safeElsewhere).toBe(true);
      expect(error.traits.configurationProblem).toContain('404');
      expect(error.countsAgainstProvider).toBe(false);
    });

    it('429 at submit is busy (retried); a runner that could not be scheduled is busy too, but after acceptance never sent elsewhere', async () => {
      const busy = await failure({ prompt: 'x [submit:429]' });
      expect(busy).toMatchObject({ code: 'provider_busy', retryable: true });
      const unscheduled = await failure({ prompt: 'x [platform:runner_scheduling_failure:503]' });
      expect(unscheduled.code).toBe('provider_busy');
      expect(unscheduled.traits.safeElsewhere).toBe(false);
    });

    it('a 5xx from the queue before it took the request is transient: retried and safe elsewhere; a 504 is not', async () => {
      const refused = await failure({ prompt: 'x [submit:503]' });
      expect(refused).toMatchObject({ code: 'provider_error', retryable: true });
      expect(refused.traits.safeElsewhere).toBe(true);
      const unknown = await failure({ prompt: 'x [submit:504]' });
      expect(unknown.traits.safeElsewhere).toBe(false);
    });

    it("a 422 the app's schema answers is the client's invalid request, with the field it names", async () => {
      const error = await failure({ upstreamOptions: { num_images: 9 } });
      expect(error).toMatchObject({ code: 'invalid_request', param: 'num_images' });
      expect(error.countsAgainstProvider).toBe(false);
    });

    it('a platform error after acceptance (request_timeout 504) fails without being sent elsewhere', async () => {
      const error = await failure({ prompt: 'x [platform:request_timeout:504]' });
      expect(error.code).toBe('provider_error');
      expect(error.traits.safeElsewhere).toBe(false);
      expect(error.message).toContain('request_timeout');
    });
  });
});
