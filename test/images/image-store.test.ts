import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { DirectoryImageStore } from '../../src/images/directory-image-store';
import type { ImageStore } from '../../src/images/image-store';
import { S3ImageStore } from '../../src/images/s3-image-store';
import { type TestS3, startTestS3 } from '../helpers/test-s3';

async function bytesOf(stream: Readable | undefined): Promise<Buffer | undefined> {
  if (!stream) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

const IMAGE = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from(Array.from({ length: 300 }, (_, i) => i % 256))]);

/** The same behaviour, whichever store (src/images/image-store.ts). */
const stores: Array<[string, () => Promise<{ store: ImageStore; done: () => Promise<void> }>]> = [
  [
    'directory',
    async () => {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-store-'));
      return { store: new DirectoryImageStore(directory), done: async () => fs.rmSync(directory, { recursive: true, force: true }) };
    },
  ],
  [
    's3 (s3rver)',
    async () => {
      const s3: TestS3 = await startTestS3();
      const store = new S3ImageStore({
        bucket: s3.bucket,
        prefix: 'images/',
        region: 'us-east-1',
        endpoint: s3.endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      });
      return {
        store,
        done: async () => {
          await store.close();
          await s3.close();
        },
      };
    },
  ],
];

describe.each(stores)('ImageStore: %s', (_name, open) => {
  let store: ImageStore;
  let done: () => Promise<void>;
  beforeAll(async () => {
    ({ store, done } = await open());
  });
  afterAll(() => done());

  it('stores bytes and reads them back whole or by range', async () => {
    await store.put('img_store1', IMAGE, 'image/png');
    expect(await bytesOf(await store.read('img_store1'))).toEqual(IMAGE);
    expect(await bytesOf(await store.read('img_store1', { first: 10, last: 19 }))).toEqual(IMAGE.subarray(10, 20));
    expect(await bytesOf(await store.read('img_store1', { first: 300, last: IMAGE.length - 1 }))).toEqual(IMAGE.subarray(300));
  });

  it('replaces bytes stored under the same id', async () => {
    await store.put('img_store2', IMAGE, 'image/png');
    const other = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
    await store.put('img_store2', other, 'image/jpeg');
    expect(await bytesOf(await store.read('img_store2'))).toEqual(other);
  });

  it('reads nothing for an unknown id, deletes, and deleting twice is fine', async () => {
    expect(await store.read('img_neverStored')).toBeUndefined();
    await store.put('img_store3', IMAGE, 'image/png');
    await store.delete('img_store3');
    expect(await store.read('img_store3')).toBeUndefined();
    await expect(store.delete('img_store3')).resolves.toBeUndefined();
  });

  it('refuses what is not an image id (no path or key tricks)', async () => {
    await expect(store.put('../../etc/passwd', IMAGE, 'image/png')).rejects.toThrow(/not an image id/);
    await expect(store.read('img_a/../b')).rejects.toThrow(/not an image id/);
  });
});
