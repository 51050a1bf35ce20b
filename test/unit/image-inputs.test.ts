import { readImageHeader, sniffImageFormat, sniffImageType } from '../../src/images/image-bytes';
import { GATEWAY_INPUT_LIMITS, checkInputCounts, checkInputImage, checkMask, inputByteLimit } from '../../src/images/inputs/input-limits';
import { decodedLength, inputSourceOf } from '../../src/images/inputs/input-source';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import type { InputImageLimits } from '../../src/providers/upstream-models';
import { ImagesService } from '../../src/images/images.service';
import { InputImages } from '../../src/images/inputs/input-images';
import { claimedPng, dataUri, headerOnly, testPng } from '../helpers/test-images';
import { thrownApiError } from '../helpers/thrown-api-error';

const ARK_LIKE: InputImageLimits = {
  max_images: 14,
  formats: ['jpeg', 'png', 'webp', 'bmp', 'tiff', 'gif'],
  max_bytes: 10 * 1024 * 1024,
  min_ratio: 1 / 16,
  max_ratio: 16,
  min_side: 15,
  max_pixels: 36_000_000,
  max_inputs_plus_outputs: 15,
  mask: false,
  delivery: 'inline',
};
const JIMENG_LIKE: InputImageLimits = {
  max_images: 10,
  formats: ['jpeg', 'png'],
  max_bytes: 15 * 1024 * 1024,
  max_side: 4096,
  min_ratio: 1 / 3,
  max_ratio: 3,
  mask: false,
  delivery: 'url',
};

describe('image headers (pure)', () => {
  it.each([
    ['png', testPng(37, 21), 37, 21],
    ['jpeg', headerOnly.jpeg(640, 480), 640, 480],
    ['gif', headerOnly.gif(300, 200), 300, 200],
    ['bmp', headerOnly.bmp(120, 90), 120, 90],
    ['webp', headerOnly.webpLossy(800, 600), 800, 600],
    ['webp', headerOnly.webpLossless(1024, 3), 1024, 3],
    ['webp', headerOnly.webpExtended(5000, 7000), 5000, 7000],
    ['tiff', headerOnly.tiff(2048, 1536, 'II'), 2048, 1536],
    ['tiff', headerOnly.tiff(99, 77, 'MM'), 99, 77],
  ])('%s: format and size from the header', (format, bytes, width, height) => {
    expect(readImageHeader(bytes)).toMatchObject({ format, width, height });
  });

  it('tells a PNG with alpha from one without', () => {
    expect(readImageHeader(testPng(4, 4, { alpha: true }))?.alpha).toBe(true);
    expect(readImageHeader(testPng(4, 4))?.alpha).toBe(false);
  });

  it('refuses what is no image, or a truncated or zero-sized header', () => {
    expect(readImageHeader(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBeUndefined();
    expect(readImageHeader(Buffer.from('{"a":1}'))).toBeUndefined();
    expect(readImageHeader(testPng(4, 4).subarray(0, 18))).toBeUndefined();
    expect(readImageHeader(headerOnly.jpeg(0, 10))).toBeUndefined();
    expect(readImageHeader(Buffer.from([0xff, 0xd8, 0xff, 0xd9]))).toBeUndefined();
  });

  it('outputs stay PNG, JPEG or WebP: the wider input formats are not taken from upstreams', () => {
    expect(sniffImageType(headerOnly.gif(1, 1))).toBeUndefined();
    expect(sniffImageFormat(headerOnly.gif(1, 1))).toBe('gif');
    expect(sniffImageType(testPng(1, 1))).toBe('image/png');
  });
});

describe('input sources (pure)', () => {
  it('reads URLs, data URIs and img_ ids; refuses anything else with image_input_invalid', () => {
    expect(inputSourceOf('https://a.example/x.png', 'images[0]')).toEqual({ kind: 'url', url: 'https://a.example/x.png' });
    expect(inputSourceOf('img_abc123', 'images[0]')).toEqual({ kind: 'stored', id: 'img_abc123' });
    expect(inputSourceOf('data:image/png;base64,AAAA', 'images[0]')).toEqual({ kind: 'data', base64: 'AAAA' });
    for (const bad of ['http://a.example/x.png', 'data:image/png;base64,AA$A', 'data:image/png;base64,AAA', 'data:text/plain;base64,AAAA', 'ftp://x', 'img_']) {
      expect(thrownApiError(() => inputSourceOf(bad, 'images[1]'))).toMatchObject({ code: 'image_input_invalid', param: 'images[1]' });
    }
  });

  it('measures a base64 payload without decoding it', () => {
    for (const size of [0, 1, 2, 3, 4, 100, 1001]) expect(decodedLength(Buffer.alloc(size).toString('base64'))).toBe(size);
  });
});

describe('input limits (pure)', () => {
  it('counts before reading: no images, too many, inputs + outputs, mask', () => {
    expect(thrownApiError(() => checkInputCounts('jimeng-3.1', undefined, 1, false))).toMatchObject({ code: 'image_input_unsupported', param: 'images' });
    expect(thrownApiError(() => checkInputCounts('m', ARK_LIKE, 15, false))).toMatchObject({ code: 'image_input_unsupported', param: 'images' });
    // Per upstream call: inputs + the one output each call asks for, whatever n is.
    const tight = { ...ARK_LIKE, max_inputs_plus_outputs: 10 };
    expect(thrownApiError(() => checkInputCounts('m', tight, 10, false))).toMatchObject({
      code: 'image_input_unsupported',
      param: 'images',
      message: expect.stringContaining('10'),
    });
    expect(() => checkInputCounts('m', tight, 9, false)).not.toThrow();
    expect(thrownApiError(() => checkInputCounts('m', ARK_LIKE, 1, true))).toMatchObject({ code: 'image_input_unsupported', param: 'mask' });
    expect(thrownApiError(() => checkInputCounts('m', ARK_LIKE, 0, true))).toMatchObject({ code: 'image_input_unsupported', param: 'mask' });
    expect(() => checkInputCounts('m', ARK_LIKE, 14, false)).not.toThrow();
    expect(() => checkInputCounts('m', undefined, 0, false)).not.toThrow();
  });

  it("per image: the model's bytes, never over the gateway's, and what is left of the total", () => {
    expect(inputByteLimit(ARK_LIKE, 0).maxBytes).toBe(10 * 1024 * 1024);
    expect(inputByteLimit({ ...ARK_LIKE, max_bytes: 100 * 1024 * 1024 }, 0).maxBytes).toBe(GATEWAY_INPUT_LIMITS.maxImageBytes);
    const last = inputByteLimit(ARK_LIKE, GATEWAY_INPUT_LIMITS.maxTotalBytes - 5);
    expect(last.maxBytes).toBe(5);
    expect(last.refusal('images[3]').message).toContain('all inputs and the mask of one request');
  });

  it('refuses a bomb by its header (413), then formats, sides and ratio (400) naming the item', () => {
    const header = (bytes: Buffer) => readImageHeader(bytes);
    expect(thrownApiError(() => checkInputImage('m', ARK_LIKE, 'images[2]', header(claimedPng(60_000, 60_000))))).toMatchObject({
      code: 'image_input_too_large',
      param: 'images[2]',
    });
    expect(thrownApiError(() => checkInputImage('m', { ...ARK_LIKE, max_pixels: undefined }, 'images[0]', header(claimedPng(6001, 6000))))).toMatchObject({
      code: 'image_input_too_large',
    });
    expect(thrownApiError(() => checkInputImage('m', JIMENG_LIKE, 'images[1]', header(headerOnly.gif(100, 100))))).toMatchObject({
      code: 'image_input_unsupported',
      param: 'images[1]',
    });
    expect(thrownApiError(() => checkInputImage('m', JIMENG_LIKE, 'images[0]', header(claimedPng(4097, 2000))))).toMatchObject({
      code: 'image_input_unsupported',
      message: expect.stringContaining('4096'),
    });
    expect(thrownApiError(() => checkInputImage('m', JIMENG_LIKE, 'images[0]', header(claimedPng(400, 100))))).toMatchObject({
      code: 'image_input_unsupported',
      message: expect.stringContaining('1/3 and 3'),
    });
    expect(thrownApiError(() => checkInputImage('m', ARK_LIKE, 'images[0]', header(claimedPng(14, 100))))).toMatchObject({
      code: 'image_input_unsupported',
      message: expect.stringContaining('at least 15'),
    });
    expect(thrownApiError(() => checkInputImage('m', ARK_LIKE, 'images[0]', undefined))).toMatchObject({ code: 'image_input_invalid', param: 'images[0]' });
    expect(checkInputImage('m', JIMENG_LIKE, 'images[0]', header(claimedPng(3000, 1000)))).toMatchObject({ width: 3000, height: 1000 });
  });

  it('a mask is a PNG with alpha the size of the first image', () => {
    const first = readImageHeader(testPng(8, 6))!;
    expect(() => checkMask(first, readImageHeader(testPng(8, 6, { alpha: true }))!)).not.toThrow();
    expect(thrownApiError(() => checkMask(first, readImageHeader(testPng(8, 6))!))).toMatchObject({ code: 'image_input_unsupported', param: 'mask' });
    expect(thrownApiError(() => checkMask(first, readImageHeader(testPng(6, 8, { alpha: true }))!))).toMatchObject({
      code: 'image_input_unsupported',
      param: 'mask',
    });
  });

  it("the spec declares the gateway's bounds as the code has them", () => {
    const gateway = loadOpenApiDocument('gateway') as unknown as { components: { schemas: Record<string, Record<string, unknown>> } };
    const text = JSON.stringify(gateway);
    const inputImages = gateway.components.schemas.InputImages as { maxItems: number; description: string };
    expect(inputImages.maxItems).toBe(GATEWAY_INPUT_LIMITS.maxImages);
    expect(inputImages.description).toContain(`${GATEWAY_INPUT_LIMITS.maxImageBytes.toLocaleString('en-US')} bytes`);
    expect(inputImages.description).toContain(`${GATEWAY_INPUT_LIMITS.maxTotalBytes.toLocaleString('en-US')} bytes`);
    expect(inputImages.description).toContain(GATEWAY_INPUT_LIMITS.maxPixels.toLocaleString('en-US'));
    expect(text).toContain(`${GATEWAY_INPUT_LIMITS.maxBodyBytes.toLocaleString('en-US')} bytes`);
  });
});

describe('inputs fetched by the upstream (delivery url) need a public PUBLIC_BASE_URL', () => {
  const imagesWith = (deps: Partial<ConstructorParameters<typeof ImagesService>[0]>) =>
    new ImagesService(deps as ConstructorParameters<typeof ImagesService>[0]);

  it('ImagesService says why its URLs are not reachable from outside', () => {
    expect(imagesWith({}).publicUrlProblem()).toMatch(/PUBLIC_BASE_URL is not set/);
    expect(imagesWith({ publicBaseUrl: 'http://localhost:8080' }).publicUrlProblem()).toMatch(/loopback, private/);
    expect(imagesWith({ publicBaseUrl: 'http://10.1.2.3' }).publicUrlProblem()).toMatch(/loopback, private/);
    expect(imagesWith({ publicBaseUrl: 'https://gw.example.com' }).publicUrlProblem()).toBeUndefined();
    // Upstreams declared private reach the gateway wherever it listens.
    const learnt = imagesWith({ upstreamsArePrivate: true });
    expect(learnt.publicUrlProblem()).toBeDefined();
    learnt.usePublicBaseUrl('http://127.0.0.1:8080');
    expect(learnt.publicUrlProblem()).toBeUndefined();
  });

  it('the intake refuses a url-delivery model with 422 image_input_public_url_required naming the setting, before reading any input', async () => {
    const inputs = new InputImages({ images: imagesWith({ publicBaseUrl: 'http://127.0.0.1:8080' }) });
    const refusal = await inputs
      .intake({ kind: 'key', id: 'key_x' }, 'jimeng-4.0', JIMENG_LIKE, { images: ['https://127.0.0.1/never-fetched.png'] })
      .catch((error: unknown) => error);
    expect(refusal).toMatchObject({ code: 'image_input_public_url_required', param: 'images', message: expect.stringContaining('PUBLIC_BASE_URL') });
    // Inline models do not need it.
    const inline = await new InputImages({ images: imagesWith({}) }).intake({ kind: 'key', id: 'key_x' }, 'm', ARK_LIKE, {
      images: [dataUri(testPng(20, 20))],
    });
    expect(inline?.images[0]?.header).toMatchObject({ format: 'png', width: 20, height: 20 });
  });
});
