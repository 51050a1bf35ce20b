import fc from 'fast-check';
import { claimedPng, headerOnly, type MultipartPart, multipartBody, testPng } from '../helpers/test-images';
import { ODD_STRINGS } from './spec-arbitraries';

/** Files a multipart fuzz request may carry: real images, header-only ones, bombs, garbage, truncated. */
const FILES: Buffer[] = [
  testPng(16, 16),
  testPng(16, 16, { alpha: true }),
  testPng(3, 200),
  claimedPng(9000, 9000),
  claimedPng(0, 5),
  testPng(16, 16).subarray(0, 20),
  headerOnly.jpeg(64, 48),
  headerOnly.gif(10, 10),
  headerOnly.bmp(10, 10),
  headerOnly.tiff(10, 10, 'MM'),
  headerOnly.webpLossless(10, 10),
  Buffer.alloc(0),
  Buffer.from('%PDF-1.7'),
  Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'),
];

const FILE_FIELDS = ['image', 'image[]', 'mask', 'other'];
const TEXT_FIELDS: Record<string, string[]> = {
  prompt: ['edit me', '', 'x'.repeat(5000), 'nul \u0000 inside'],
  model: ['local-1', 'jimeng-4.0', 'no-such-model', ''],
  n: ['1', '2', '4', '0', '9', 'two', ''],
  size: ['32x32', 'auto', '0x0', '99999x1'],
  response_format: ['b64_json', 'url', 'png'],
  user: ['u-1'],
  stream: ['false', 'true'],
  partial_images: ['0', '2'],
  image: ['https://example.com/a.png'],
  quality: ['high'],
};

/**
 * multipart/form-data bodies for an operation that declares them: mostly well-formed (text fields
 * from the operation's own, files from FILES under the file field names and a stray one), some
 * broken (a boundary that does not match, cut short, no closing delimiter, garbage).
 */
export function multipartRequests(): fc.Arbitrary<{ body: Buffer; contentType: string }> {
  const textPart = fc
    .constantFrom(...Object.keys(TEXT_FIELDS))
    .chain((name) => fc.constantFrom(...(TEXT_FIELDS[name] as string[]), ...ODD_STRINGS.slice(0, 3)).map((value) => ({ name, value })));
  const filePart = fc
    .tuple(fc.constantFrom(...FILE_FIELDS), fc.constantFrom(...FILES), fc.constantFrom('a.png', 'b.jpg', '', 'ü ñ.png', '../../etc/passwd'))
    .map(([name, bytes, filename]) => ({ name, filename, bytes, type: 'image/png' }));
  const essentials: MultipartPart[] = [
    { name: 'prompt', value: 'edit me' },
    { name: 'model', value: 'local-1' },
    { name: 'size', value: '32x32' },
    { name: 'response_format', value: 'b64_json' },
  ];
  const wellFormed = fc
    .tuple(fc.boolean(), fc.array(textPart, { maxLength: 4 }), fc.array(filePart, { maxLength: 6 }), fc.nat({ max: 18 }))
    .map(([withEssentials, texts, files, extraImages]) => {
      // Sometimes many images (over the model's 4 and the gateway's 16).
      const many = extraImages > 14 ? Array.from({ length: extraImages }, () => ({ name: 'image[]', filename: 'x.png', bytes: testPng(4, 4) })) : [];
      return multipartBody([...(withEssentials ? essentials : []), ...texts, ...files, ...many]);
    });
  const broken = fc.tuple(wellFormed, fc.constantFrom('other-boundary', 'cut', 'no-close', 'garbage')).map(([{ body, contentType }, how]) => {
    if (how === 'other-boundary') return { body, contentType: 'multipart/form-data; boundary=not-the-one' };
    if (how === 'cut') return { body: body.subarray(0, Math.floor(body.length / 2)), contentType };
    if (how === 'no-close') return { body: body.subarray(0, body.lastIndexOf('--cgw-boundary')), contentType };
    return { body: Buffer.from('this is not multipart at all'), contentType: 'multipart/form-data' };
  });
  // A valid request but for its files: what reaches the intake (limits, formats, bombs, the mask).
  const file = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(testPng(16, 16), testPng(9, 5)) }, { weight: 1, arbitrary: fc.constantFrom(...FILES) });
  const images = fc.array(fc.tuple(fc.constantFrom('image', 'image[]'), file), { minLength: 1, maxLength: 5 });
  const mask = fc.option(
    fc.oneof({ weight: 3, arbitrary: fc.constant(testPng(16, 16, { alpha: true })) }, { weight: 1, arbitrary: fc.constantFrom(...FILES) }),
    { freq: 3 },
  );
  const validButFiles = fc
    .tuple(images, mask, fc.constantFrom('1', '2'))
    .map(([files, mask, n]) =>
      multipartBody([
        ...essentials,
        { name: 'n', value: n },
        ...files.map(([name, bytes]) => ({ name, filename: 'in.png', bytes })),
        ...(mask ? [{ name: 'mask', filename: 'mask.png', bytes: mask }] : []),
      ]),
    );
  return fc.oneof({ weight: 3, arbitrary: validButFiles }, { weight: 2, arbitrary: wellFormed }, { weight: 1, arbitrary: broken });
}
