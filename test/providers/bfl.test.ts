import { BflClient, submitBody } from '../../src/providers/bfl/bfl-client';
import { BFL_ERRORS } from '../../src/providers/bfl/bfl-errors';
import type { ErrorRule } from '../../src/providers/error-table';
import type { ProviderRequest } from '../../src/providers/provider';
import { UpstreamError } from '../../src/providers/upstream-errors';
import { type FakeBfl, startFakeBfl } from '../fakes/fake-bfl';
import { testPng } from '../helpers/test-images';

/** The BFL client against a fake speaking BFL's wire format (test/fakes/fake-bfl.ts). */
const KEY = 'bfl-test-key-0001';

describe('BFL client (submit POST /v1/{model}, poll the polling_url, result.sample)', () => {
  let bfl: FakeBfl;
  let client: BflClient;

  beforeAll(async () => {
    bfl = await startFakeBfl({ apiKey: KEY });
    client = new BflClient({ provider: 'bfl', baseUrl: bfl.url, apiKey: KEY, pollIntervalMs: 1 });
  });
  afterEach(() => {
    bfl.onPoll = undefined;
    bfl.releaseHeld();
  });
  afterAll(() => bfl.close());

  const request = (over: Partial<ProviderRequest> = {}): ProviderRequest => ({
    prompt: 'a lighthouse',
    upstreamModel: 'flux-pro-1.1',
    n: 1,
    width: 1024,
    height: 768,
    responseFormat: 'url',
    ...over,
  });
  const run = (over: Partial<ProviderRequest> = {}, on = client, signal = new AbortController().signal) => on.generate(request(over), signal);
  const failure = async (over: Partial<ProviderRequest>, on = client) => {
    const error = await run(over, on).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UpstreamError);
    return error as UpstreamError;
  };
  const submitsOf = (prompt: string) => bfl.submits.filter((s) => s.body.prompt === prompt);
  const png = testPng(32, 16);
  const input = () => ({ bytes: png, format: 'png' as const, mimeType: 'image/png', width: 32, height: 16 });

  it('FLUX1.1 [pro]: submits width, height and seed with x-key, records the polling URL, polls it to Ready and returns the signed sample URL', async () => {
    const sent: string[] = [];
    const accepted: string[] = [];
    const images = await run({
      prompt: 'first light [pending:3]',
      seed: 7,
      onRequestSent: () => sent.push('sent'),
      onTaskAccepted: async (handle) => void accepted.push(handle),
    });
    const [submit] = submitsOf('first light [pending:3]');
    expect(submit).toMatchObject({ model: 'flux-pro-1.1', body: { prompt: 'first light [pending:3]', width: 1024, height: 768, seed: 7 } });
    expect(Object.keys(submit!.body).sort()).toEqual(['height', 'prompt', 'seed', 'width']);
    expect(sent).toEqual(['sent']);
    // The handle is the polling URL BFL answered, recorded before the first poll.
    expect(accepted).toEqual([`${bfl.url}/v1/get_result?id=${submit!.id}`]);
    expect(bfl.polls.filter((id) => id === submit!.id)).toHaveLength(4);
    expect(images).toEqual([
      { url: expect.stringMatching(new RegExp(`^${bfl.url}/results/${submit!.id}/sample\\.jpeg\\?se=\\d+&sig=[0-9a-f]+$`)), width: 1024, height: 768 },
    ]);
    // The URL serves the image bytes (a signed URL living 10 minutes): the gateway fetches it at once.
    const file = await fetch(images[0]!.url!);
    expect([file.status, file.headers.get('content-type')]).toEqual([200, 'image/jpeg']);
    expect((await fetch(images[0]!.url!.replace(/sig=[0-9a-f]+/, 'sig=0'))).status).toBe(403);
  });

  it('n images are n tasks, each with seed + index', async () => {
    await run({ prompt: 'two boats', n: 2, seed: 10 });
    expect(
      submitsOf('two boats')
        .map((s) => s.body.seed)
        .sort(),
    ).toEqual([10, 11]);
  });

  it("output_format (jpeg | png) where the model documents it, and the catalog's upstream_options as they are", async () => {
    const images = await run({ prompt: 'as png', imageOptions: { output_format: 'png' }, upstreamOptions: { prompt_upsampling: true } });
    expect(submitsOf('as png')[0]!.body).toMatchObject({ output_format: 'png', prompt_upsampling: true });
    expect(images[0]!.url).toMatch(/sample\.png\?/);
    // WebP is no format BFL makes: not sent (BFL would refuse it).
    await run({ prompt: 'as webp', imageOptions: { output_format: 'webp' } });
    expect(submitsOf('as webp')[0]!.body).not.toHaveProperty('output_format');
  });

  it('FLUX.1 Kontext [pro]: the size as aspect_ratio, the reference image as input_image (base64)', async () => {
    await run({ prompt: 'kontext edit', upstreamModel: 'flux-kontext-pro', width: 1280, height: 720, inputImages: [input()] });
    const [submit] = submitsOf('kontext edit');
    expect(submit!.body).toEqual({ prompt: 'kontext edit', aspect_ratio: '16:9', input_image: png.toString('base64') });
    expect(submit!.images).toEqual([expect.objectContaining({ format: 'png', width: 32, height: 16 })]);
    // Text to image works without a reference.
    await run({ prompt: 'kontext t2i', upstreamModel: 'flux-kontext-pro', width: 672, height: 1568 });
    expect(submitsOf('kontext t2i')[0]!.body).toEqual({ prompt: 'kontext t2i', aspect_ratio: '9:21' });
  });

  it('FLUX.2 [pro]: width and height, input_image … input_image_N', async () => {
    await run({ prompt: 'flux two', upstreamModel: 'flux-2-pro', width: 2048, height: 2048, inputImages: [input(), input(), input()] });
    expect(Object.keys(submitsOf('flux two')[0]!.body).sort()).toEqual(['height', 'input_image', 'input_image_2', 'input_image_3', 'prompt', 'width']);
    expect(submitsOf('flux two')[0]!.images).toHaveLength(3);
  });

  it("the fake refuses what BFL refuses: sizes out of bounds, a missing prompt (422, the client's request)", async () => {
    const big = await failure({ prompt: 'too big', width: 1536, height: 1024 });
    expect([big.code, big.param, big.traits.safeElsewhere]).toEqual(['invalid_request', 'size', false]);
    expect((await failure({ prompt: 'off grid', upstreamModel: 'flux-2-pro', width: 1000, height: 1000 })).param).toBe('size');
    expect((await failure({ prompt: 'over 4 MP', upstreamModel: 'flux-2-pro', width: 2064, height: 2048 })).param).toBe('size');
    expect((await failure({ prompt: '' })).param).toBe('prompt');
    expect(bfl.submits.filter((s) => ['too big', 'off grid', 'over 4 MP', ''].includes(String(s.body.prompt)))).toEqual([]);
    // A Kontext size that is no ratio the gateway names is refused before anything is sent.
    const received = bfl.received.length;
    await expect(run({ upstreamModel: 'flux-kontext-pro', width: 1000, height: 1000 })).rejects.toMatchObject({ code: 'invalid_request', param: 'size' });
    expect(bfl.received).toHaveLength(received);
  });

  describe('the error table: each row decides its family (a test fails without its row)', () => {
    /** The client of a descriptor whose table lacks `codes`' row. */
    const without = (code: string) => {
      const table: ErrorRule[] = BFL_ERRORS.filter((rule) => !rule.codes.includes(code));
      expect(table.length).toBe(BFL_ERRORS.length - 1);
      return table;
    };
    const withTable = async <T>(table: readonly ErrorRule[], body: () => Promise<T>): Promise<T> => {
      const rows = BFL_ERRORS as ErrorRule[];
      const saved = rows.splice(0, rows.length, ...table);
      try {
        return await body();
      } finally {
        rows.splice(0, rows.length, ...saved);
      }
    };

    it.each(['401', '402', '403'])("HTTP %s on submit: the account's problem (the channel is disabled, not retried elsewhere)", async (status) => {
      const error = await failure({ prompt: `refused [submit:${status}]` });
      expect(error).toMatchObject({ code: 'provider_error', retryable: false });
      expect(error.traits).toMatchObject({ accountProblem: expect.stringContaining(`HTTP ${status}`), statusCode: Number(status), safeElsewhere: true });
      const bare = await withTable(without(`http_${status}`), () => failure({ prompt: `refused [submit:${status}]` }));
      expect(bare.traits.accountProblem).toBeUndefined();
    });

    it("a wrong key is the account's problem", async () => {
      const wrong = new BflClient({ provider: 'bfl', baseUrl: bfl.url, apiKey: 'not-the-key', pollIntervalMs: 1 });
      expect((await failure({}, wrong)).traits.accountProblem).toContain('HTTP 401');
    });

    it('HTTP 429 on submit: busy (retried after a cool-down), safe elsewhere', async () => {
      const error = await failure({ prompt: 'crowded [submit:429]' });
      expect([error.code, error.retryable, error.traits.safeElsewhere]).toEqual(['provider_busy', true, true]);
      const bare = await withTable(without('http_429'), () => failure({ prompt: 'crowded [submit:429]' }));
      expect(bare.code).toBe('provider_error');
    });

    it('HTTP 500 / 503 on submit: transient (retried), safe elsewhere; on a poll they only delay the next poll', async () => {
      for (const status of ['500', '503']) {
        const error = await failure({ prompt: `flaky [submit:${status}]` });
        expect([error.code, error.retryable, error.traits.safeElsewhere]).toEqual(['provider_error', true, true]);
        const images = await run({ prompt: `poll hiccup [poll-error:${status}:2]` });
        expect(images).toHaveLength(1);
        const bare = await withTable(without(`http_${status}`), () => failure({ prompt: `poll hiccup bare [poll-error:${status}:2]` }));
        // Without the row a failed poll ends the task where it ran: never sent elsewhere.
        expect([bare.retryable, bare.traits.safeElsewhere]).toEqual([false, false]);
      }
    });

    it('a busy poll (429) only delays the next poll', async () => {
      expect(await run({ prompt: 'poll busy [poll-error:429:3]' })).toHaveLength(1);
    });

    it("Request Moderated is the client's content; Content Moderated its output; neither counts against the channel nor goes elsewhere", async () => {
      const input = await failure({ prompt: 'flagged [moderated:request]' });
      expect([input.code, input.countsAgainstProvider, input.traits.safeElsewhere]).toEqual(['content_policy_violation', false, false]);
      const output = await failure({ prompt: 'flagged output [moderated:content]' });
      expect([output.code, output.countsAgainstProvider, output.traits.safeElsewhere]).toEqual(['output_moderated', false, false]);
      expect((await withTable(without('Request Moderated'), () => failure({ prompt: 'flagged [moderated:request]' }))).code).toBe('provider_error');
      expect((await withTable(without('Content Moderated'), () => failure({ prompt: 'flagged output [moderated:content]' }))).code).toBe('provider_error');
    });

    it('a task that ends in Error, or is not found, fails where it ran: provider_error, never sent elsewhere', async () => {
      for (const prompt of ['broken [task-error]', 'vanished [lost]']) {
        const polls = bfl.polls.length;
        const error = await failure({ prompt });
        expect([error.code, error.countsAgainstProvider, error.traits.safeElsewhere]).toEqual(['provider_error', true, false]);
        // Ended: polled no further.
        expect(bfl.polls.length - polls).toBe(prompt.includes('lost') ? 1 : 2);
      }
    });
  });

  describe('resume and cancel', () => {
    it('a takeover resumes by the polling URL: it polls, never submits again', async () => {
      let handle: string | undefined;
      // The process that submitted dies right after recording the handle.
      await expect(
        run({
          prompt: 'taken over [pending:3]',
          onTaskAccepted: async (accepted) => {
            handle = accepted;
            throw new Error('process gone');
          },
        }),
      ).rejects.toThrow('process gone');
      const submits = bfl.submits.length;
      const received = bfl.received.length;
      const images = await run({ prompt: 'taken over [pending:3]', resumeTaskId: handle! });
      expect([bfl.submits.length, bfl.received.length]).toEqual([submits, received]);
      expect(images).toEqual([expect.objectContaining({ url: expect.stringContaining(`/results/${submitsOf('taken over [pending:3]')[0]!.id}/`) })]);
      // A resumed request of n images still polls its one task.
      await run({ prompt: 'taken over [pending:3]', n: 3, resumeTaskId: handle! });
      expect(bfl.received.length).toBe(received);
    });

    it('an abort stops the polling: the call rejects and the task is polled no more', async () => {
      const controller = new AbortController();
      bfl.onPoll = (_id, count) => {
        if (count === 3) controller.abort(new Error('client canceled'));
      };
      await expect(run({ prompt: 'canceled [hold]' }, client, controller.signal)).rejects.toThrow();
      const [task] = submitsOf('canceled [hold]');
      const polled = bfl.polls.filter((id) => id === task!.id).length;
      expect(polled).toBe(3);
      // Another generation's whole run (many poll intervals) later, the canceled task has still not been polled again.
      await run({ prompt: 'after the cancel [pending:5]' });
      expect(bfl.polls.filter((id) => id === task!.id)).toHaveLength(polled);
    });

    it('an abort before the submit sends nothing', async () => {
      const controller = new AbortController();
      controller.abort(new Error('gone'));
      const received = bfl.received.length;
      await expect(run({ prompt: 'never sent' }, client, controller.signal)).rejects.toThrow('gone');
      expect(bfl.received.length).toBe(received);
    });
  });

  describe("SSRF: URLs BFL answers are followed only on the account's own origin or https *.bfl.ai", () => {
    it('a polling URL on another host is neither recorded nor polled (the key would go there)', async () => {
      const accepted: string[] = [];
      const error = await failure({ prompt: 'elsewhere [foreign-polling]', onTaskAccepted: async (h) => void accepted.push(h) });
      expect(error.message).toMatch(/polling_url on localhost:\d+, neither the account's own host nor BFL's/);
      expect(error.traits.safeElsewhere).toBe(false);
      expect(accepted).toEqual([]);
      expect(bfl.polls).not.toContain(submitsOf('elsewhere [foreign-polling]')[0]!.id);
    });

    it('a stored handle is checked again before a takeover polls it', async () => {
      const polls = bfl.polls.length;
      for (const handle of [
        'http://169.254.169.254/latest/meta-data?id=x',
        'http://api.bfl.ai/v1/get_result?id=x',
        'https://api.bfl.ai.evil.example/v1/get_result?id=x',
        'https://user:pw@api.eu.bfl.ai/v1/get_result?id=x',
        'not a url',
      ]) {
        const error = await failure({ resumeTaskId: handle });
        expect(error.code).toBe('provider_error');
      }
      expect(bfl.polls.length).toBe(polls);
    });

    // It carries no key: the images service downloads it from the provider's result hosts only (test/images/result-hosts.test.ts).
    it('a sample URL is handed over as BFL answered it, whatever its host', async () => {
      const images = await run({ prompt: 'odd sample [foreign-sample]' });
      expect(images[0]!.url).toMatch(/^http:\/\/localhost:\d+\/results\//);
    });

    it("BFL's own hosts are trusted as https: a regional delivery host is returned as the image URL", async () => {
      const regional = await startFakeBfl({ apiKey: KEY, deliveryHost: 'delivery-eu1.bfl.ai' });
      try {
        const on = new BflClient({ provider: 'bfl', baseUrl: `${regional.url}/`, apiKey: KEY, pollIntervalMs: 1 });
        const images = await run({ prompt: 'regional' }, on);
        expect(images[0]!.url).toMatch(/^https:\/\/delivery-eu1\.bfl\.ai\/results\/[0-9a-f-]+\/sample\.jpeg\?/);
      } finally {
        await regional.close();
      }
    });
  });

  it("a model id that is no path segment is the channel's configuration, refused before anything is sent", async () => {
    const received = bfl.received.length;
    const error = await failure({ upstreamModel: '../v1/get_result' });
    expect(error.traits.configurationProblem).toBeDefined();
    expect(bfl.received.length).toBe(received);
  });

  it('submitBody sends a model the table does not know width, height and seed + index', () => {
    expect(submitBody(request({ upstreamModel: 'flux-pro-1.1-ultra', seed: 5 }), 2)).toEqual({ prompt: 'a lighthouse', width: 1024, height: 768, seed: 7 });
  });
});
