import { Readable } from 'node:stream';
import OpenAI, { toFile } from 'openai';
import request from 'supertest';
import { editInOwnProcess, expectOnePng, openaiClient } from '../helpers/openai-sdk';
import { SpecResponses } from '../helpers/spec-responses';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { claimedPng, testPng } from '../helpers/test-images';

type EditParams = OpenAI.Images.ImageEditParamsNonStreaming;

describe('POST /v1/images/edits (editImageOpenAI) with the official openai client', () => {
  let t: TestGateway;
  const spec = new SpecResponses('gateway');
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const client = (apiKey: string) => openaiClient(t, apiKey);
  const creditsUsed = (id: string) => t.api.creditsUsed(id);
  const inputsOf = async (generationId: string) =>
    t.gateway.database.db
      .selectFrom('stored_images')
      .selectAll()
      .where('generation_id', '=', generationId)
      .where('role', '!=', 'output')
      .orderBy('role')
      .orderBy('position')
      .execute();
  const lastGeneration = async (keyId: string) =>
    (
      await t.gateway.database.db
        .selectFrom('generations')
        .select('id')
        .where('key_id', '=', keyId)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow()
    ).id;
  /** The same request over raw HTTP, its answer checked against the spec. */
  const rawEdit = async (key: string, build: (req: request.Test) => request.Test) => {
    const res = await build(request(t.gateway.url).post('/v1/images/edits').set('Authorization', `Bearer ${key}`));
    const problem = spec.check('post', '/v1/images/edits', res);
    if (problem) throw new Error(`Response does not match the spec: ${problem}\n${res.status} ${res.text.slice(0, 500)}`);
    return res;
  };

  it('edits one image (toFile from a Buffer): b64_json in the OpenAI shape, the upload stored as the input, charged per image made', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const answer = await client(key).images.edit({
      image: await toFile(testPng(24, 16), 'cat.png', { type: 'image/png' }),
      prompt: 'the cat in a hat',
      model: 'local-1',
      size: '32x32',
      response_format: 'b64_json',
      user: 'end-user-7',
    });
    expectOnePng(answer);
    expect(answer.data![0]!.revised_prompt).toBe('the cat in a hat');
    expect(await creditsUsed(id)).toBe(1);
    const rows = await inputsOf(await lastGeneration(id));
    expect(rows.map((row) => [row.role, Number(row.width), Number(row.height)])).toEqual([['input', 24, 16]]);
  });

  it('several images (image[]), one from a stream, with a mask and n = 2', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const answer = await client(key).images.edit({
      image: [
        await toFile(testPng(20, 20), 'a.png'),
        await toFile(Readable.from([testPng(10, 30, { shade: 9 })]), 'b.png'),
        await toFile(testPng(5, 5), 'c.png'),
      ],
      mask: await toFile(testPng(20, 20, { alpha: true }), 'mask.png'),
      prompt: 'three into one',
      model: 'local-1',
      n: 2,
      size: '32x32',
    });
    expect(answer.data).toHaveLength(2);
    expect(answer.data![0]!.url).toMatch(/\/images\/img_/);
    expect(await creditsUsed(id)).toBe(2);
    const rows = await inputsOf(await lastGeneration(id));
    expect(rows.map((row) => [row.role, Number(row.position), Number(row.width), Number(row.height)])).toEqual([
      ['input', 0, 20, 20],
      ['input', 1, 10, 30],
      ['input', 2, 5, 5],
      ['mask', 0, 20, 20],
    ]);
  });

  it('the asynchronous form (Prefer: respond-async) answers 202, and with wait=N the result, run with the uploads', async () => {
    const { key } = await t.createKey();
    const res = await rawEdit(key, (req) =>
      req.set('Prefer', 'respond-async').field('prompt', 'later').field('model', 'local-1').field('size', '32x32').attach('image', testPng(8, 8), 'a.png'),
    );
    expect(res.status).toBe(202);
    expect(res.body.status).toMatch(/queued|running|succeeded/);
    // wait=N: answered in the OpenAI shape once the worker ran it with the uploads.
    const waited = await rawEdit(key, (req) =>
      req
        .set('Prefer', 'respond-async, wait=10')
        .field('prompt', 'soon')
        .field('model', 'local-1')
        .field('size', '32x32')
        .field('response_format', 'b64_json')
        .attach('image', testPng(8, 8), 'a.png'),
    );
    expect(waited.status).toBe(200);
    expect(waited.headers['preference-applied']).toBe('wait=10');
    expect(Object.keys(waited.body).sort()).toEqual(['created', 'data']);
    expect(waited.body.data[0]).toMatchObject({ b64_json: expect.any(String), revised_prompt: 'soon' });
  });

  it('refusals reach the SDK as its typed errors, nothing charged', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const edit = (params: Record<string, unknown>) =>
      client(key)
        .images.edit({ prompt: 'x', model: 'local-1', size: '32x32', ...params } as unknown as EditParams)
        .then(
          () => {
            throw new Error('expected a refusal');
          },
          (error: unknown) => error as InstanceType<typeof OpenAI.APIError>,
        );
    const tooMany = await edit({ image: await Promise.all(Array.from({ length: 5 }, (_, i) => toFile(testPng(4, 4), `${i}.png`))) });
    expect(tooMany).toBeInstanceOf(OpenAI.BadRequestError);
    expect([tooMany.code, tooMany.param]).toEqual(['image_input_unsupported', 'images']);
    const notImage = await edit({ image: await toFile(Buffer.from('%PDF-1.7 not an image'), 'a.pdf') });
    expect(notImage).toBeInstanceOf(OpenAI.BadRequestError);
    expect([notImage.code, notImage.param]).toEqual(['image_input_invalid', 'images[0]']);
    const bomb = await edit({ image: await toFile(claimedPng(9000, 9000), 'bomb.png') });
    expect([bomb.status, bomb.code, bomb.param]).toEqual([413, 'image_input_too_large', 'images[0]']);
    const maskNoAlpha = await edit({ image: await toFile(testPng(4, 4), 'a.png'), mask: await toFile(testPng(4, 4), 'm.png') });
    expect([maskNoAlpha.status, maskNoAlpha.code, maskNoAlpha.param]).toEqual([400, 'image_input_unsupported', 'mask']);
    const unknownModel = await edit({ image: await toFile(testPng(4, 4), 'a.png'), model: 'nope' });
    expect(unknownModel).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await creditsUsed(id)).toBe(0);
  });

  it('more files than the gateway takes (40 small PNGs, refused at the 17th) reach the SDK in its own process as its BadRequestError, not a connection error', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const images = Array.from({ length: 40 }, (_, i) => testPng(8, 8, { shade: i }));
    expect(await editInOwnProcess(t, key, images, 5)).toEqual(Array.from({ length: 5 }, () => 'BadRequestError 400 invalid_request image'));
    expect(await creditsUsed(id)).toBe(0);
  });

  it("raw multipart: a file over the model's bytes is 413 while it streams; missing fields and stray files are 400; no key is 401", async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const big = Buffer.concat([testPng(8, 8), Buffer.alloc(10 * 1024 * 1024 + 1)]);
    const tooLarge = await rawEdit(key, (req) => req.field('prompt', 'x').field('model', 'local-1').attach('image', big, 'big.png'));
    expect([tooLarge.status, tooLarge.body.error.code, tooLarge.body.error.param]).toEqual([413, 'image_input_too_large', 'images[0]']);
    // Past the 15 MiB any input may have: refused while it streams, never buffered; the rest of the body is dropped, so the client still reads the answer.
    const huge = Buffer.concat([testPng(8, 8), Buffer.alloc(16 * 1024 * 1024)]);
    const cut = await rawEdit(key, (req) => req.field('prompt', 'x').field('model', 'local-1').attach('image', huge, 'huge.png'));
    expect([cut.status, cut.body.error.code, cut.body.error.param]).toEqual([413, 'image_input_too_large', 'images[0]']);
    const noImage = await rawEdit(key, (req) => req.field('prompt', 'x').field('model', 'local-1'));
    expect([noImage.status, noImage.body.error.code]).toEqual([400, 'invalid_request']);
    const stray = await rawEdit(key, (req) =>
      req.field('prompt', 'x').field('model', 'local-1').attach('image', testPng(4, 4), 'a.png').attach('other', testPng(4, 4), 'o.png'),
    );
    expect([stray.status, stray.body.error.code, stray.body.error.param]).toEqual([400, 'invalid_request', 'other']);
    const textImage = await rawEdit(key, (req) => req.field('prompt', 'x').field('model', 'local-1').field('image', 'https://example.com/a.png'));
    expect([textImage.status, textImage.body.error.code]).toEqual([400, 'invalid_request']);
    const streaming = await rawEdit(key, (req) =>
      req.field('prompt', 'x').field('model', 'local-1').field('stream', 'true').attach('image', testPng(4, 4), 'a.png'),
    );
    expect([streaming.status, streaming.body.error.code]).toEqual([400, 'invalid_request']);
    const seventeen = await rawEdit(key, (req) =>
      Array.from({ length: 18 }, (_, i) => i).reduce(
        (at, i) => at.attach('image', testPng(2, 2), `${i}.png`),
        req.field('prompt', 'x').field('model', 'local-1'),
      ),
    );
    expect([seventeen.status, seventeen.body.error.code, seventeen.body.error.param]).toEqual([400, 'invalid_request', 'image']);
    const badN = await rawEdit(key, (req) => req.field('prompt', 'x').field('model', 'local-1').field('n', '9').attach('image', testPng(4, 4), 'a.png'));
    expect([badN.status, badN.body.error.param]).toEqual([400, 'n']);
    expect(await creditsUsed(id)).toBe(0);
    const anonymous = await request(t.gateway.url)
      .post('/v1/images/edits')
      .field('prompt', 'x')
      .field('model', 'local-1')
      .attach('image', testPng(4, 4), 'a.png');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('missing_api_key');
  });

  it('raw multipart: two masks, or a text field sent twice, are 400 naming the field, nothing charged', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const withImage = (req: request.Test) => req.field('model', 'local-1').field('size', '32x32').attach('image', testPng(20, 20), 'a.png');
    const twoMasks = await rawEdit(key, (req) =>
      withImage(req.field('prompt', 'x'))
        .attach('mask', testPng(20, 20, { alpha: true }), 'm1.png')
        .attach('mask', testPng(20, 20, { alpha: true, shade: 3 }), 'm2.png'),
    );
    expect([twoMasks.status, twoMasks.body.error.code, twoMasks.body.error.param]).toEqual([400, 'invalid_request', 'mask']);
    const twoPrompts = await rawEdit(key, (req) => withImage(req.field('prompt', 'first').field('prompt', 'second')));
    expect([twoPrompts.status, twoPrompts.body.error.code, twoPrompts.body.error.param]).toEqual([400, 'invalid_request', 'prompt']);
    expect(await creditsUsed(id)).toBe(0);
  });

  it('a body that ends inside a file part (no closing boundary) is 400, and the gateway keeps serving', async () => {
    const { key } = await t.createKey({ credits_quota: 10 });
    const boundary = 'cgw-cut-boundary';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image[]"; filename="b.jpg"\r\nContent-Type: image/png\r\n\r\n`),
      Buffer.from('GIF89a\n\0\n\0\0\0\0\r\n', 'binary'),
    ]);
    const cut = await rawEdit(key, (req) => req.set('Content-Type', `multipart/form-data; boundary=${boundary}`).send(body));
    expect([cut.status, cut.body.error.code]).toEqual([400, 'invalid_request']);
    expect((await request(t.gateway.url).get('/healthz')).status).toBe(200);
  });

  it('the same Idempotency-Key with the same files replays; with other files it is 422', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const send = (image: Buffer) =>
      rawEdit(key, (req) =>
        req
          .set('Idempotency-Key', 'edit-once-1')
          .field('prompt', 'x')
          .field('model', 'local-1')
          .field('size', '32x32')
          .field('response_format', 'b64_json')
          .attach('image', image, 'a.png'),
      );
    const first = await send(testPng(6, 6));
    const replay = await send(testPng(6, 6));
    expect(first.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(first.body);
    const other = await send(testPng(7, 7));
    expect([other.status, other.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    expect(await creditsUsed(id)).toBe(1);
  });
});
