import request from 'supertest';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';

/** The contract's refusals of the common mistakes: a sentence a person can act on, and `param` spelled as the docs spell it. */
describe('validator wording', () => {
  let t: TestGateway;
  let key: string;
  beforeAll(async () => {
    t = await startTestGateway();
    ({ key } = await t.createKey());
  });
  afterAll(() => t.close());

  const refusal = async (body: Record<string, unknown>, path = '/images/generate') => {
    const res = await t.api.client(key, body, path);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    return res.body.error as { message: string; param: string };
  };

  it('size "8x8": how a size is written, not the regular expression', async () => {
    const error = await refusal(localRequest({ size: '8x8' }));
    expect(error.param).toBe('size');
    expect(error.message).toBe(
      'size: give the size as WIDTHxHEIGHT in pixels, each side 10 to 9999 (e.g. 1024x1024); the sizes a model takes are its size_bounds (GET /v1/models/{model})',
    );
    const openai = await refusal({ model: 'local-1', prompt: 'a lighthouse', size: '8x8' }, '/v1/images/generations');
    expect(openai.message).toContain('size: give the size as WIDTHxHEIGHT in pixels, each side 10 to 9999 (e.g. 1024x1024), or auto;');
    expect(openai.message).not.toMatch(/pattern|\^/);
  });

  it('stream: true says streaming is not supported, not "allowed values: false"', async () => {
    const error = await refusal({ model: 'local-1', prompt: 'a lighthouse', stream: true }, '/v1/images/generations');
    expect(error).toMatchObject({
      param: 'stream',
      message: 'stream: streaming is not supported: the answer is one JSON body; leave stream out or send false',
    });
    const partial = await refusal({ model: 'local-1', prompt: 'a lighthouse', partial_images: 2 }, '/v1/images/generations');
    expect(partial.message).toBe('partial_images: partial images need streaming, which is not supported; leave partial_images out or send 0');
  });

  it('stream=true on a multipart edit: the same sentence', async () => {
    const res = await request(t.gateway.url)
      .post('/v1/images/edits')
      .set('Authorization', `Bearer ${key}`)
      .field('model', 'local-1')
      .field('prompt', 'a lighthouse')
      .field('stream', 'true')
      .attach('image', testPng(32, 32), 'in.png');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      param: 'stream',
      message: 'stream: streaming is not supported: the answer is one JSON body; leave stream out or send false',
    });
  });

  it('an http:// image URL: what an input may be, param images[1] as the docs spell it', async () => {
    const error = await refusal(localRequest({ images: ['https://images.example.com/a.png', 'http://images.example.com/b.png'] }));
    expect(error.param).toBe('images[1]');
    expect(error.message).toBe(
      "images[1]: give an https:// URL (plain http:// is not fetched), a data:image/<format>;base64, URI, or the id (img_...) of an image of yours in the gateway's store",
    );
  });

  it('other rules keep their own wording, with the same spelling of param', async () => {
    const short = await refusal(localRequest({ images: ['img'] }));
    expect(short).toMatchObject({ param: 'images[0]', message: 'images[0]: must NOT have fewer than 5 characters' });
    const n = await refusal(localRequest({ n: 9 }));
    expect(n).toMatchObject({ param: 'n', message: 'n: must be <= 4' });
  });
});
