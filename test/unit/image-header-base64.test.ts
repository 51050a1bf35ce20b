import { readBase64ImageHeader } from '../../src/images/image-bytes';
import { solidJpeg, solidPng } from '../fakes/solid-images';
import { headerOnly } from '../helpers/test-images';

/** The delivered size of a base64 image, read from its header without decoding the whole payload when it need not be. */
describe('readBase64ImageHeader', () => {
  it('reads the size of a PNG and a JPEG from their headers', () => {
    expect(readBase64ImageHeader(solidPng(1392, 752).toString('base64'))).toMatchObject({ format: 'png', width: 1392, height: 752 });
    expect(readBase64ImageHeader(solidJpeg(1376, 768).toString('base64'))).toMatchObject({ format: 'jpeg', width: 1376, height: 768 });
  });

  it('finds a JPEG frame header that comes after more metadata than the first chunk it decodes', () => {
    const jpeg = headerOnly.jpeg(640, 480);
    // SOI, then a 65,533-byte APP1 segment (EXIF-sized), then the rest with its frame header.
    const app1 = Buffer.concat([Buffer.from([0xff, 0xe1, 0xff, 0xff]), Buffer.alloc(0xffff - 2)]);
    const padded = Buffer.concat([jpeg.subarray(0, 2), app1, jpeg.subarray(2)]);
    expect(readBase64ImageHeader(padded.toString('base64'))).toMatchObject({ format: 'jpeg', width: 640, height: 480 });
  });

  it('is undefined for bytes that are no image, however long', () => {
    expect(readBase64ImageHeader(Buffer.alloc(200_000, 0x41).toString('base64'))).toBeUndefined();
    expect(readBase64ImageHeader(Buffer.from('<html></html>').toString('base64'))).toBeUndefined();
  });
});
