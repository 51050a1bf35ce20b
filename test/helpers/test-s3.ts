import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

/** A local S3-compatible server (s3rver) on a free loopback port, with one empty bucket. */
export interface TestS3 {
  endpoint: string;
  bucket: string;
  /** IMAGE_* settings for a gateway that stores images there. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function startTestS3(): Promise<TestS3> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-s3rver-'));
  const bucket = 'gateway-images';
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const address = (await server.run()) as AddressInfo;
  const endpoint = `http://127.0.0.1:${address.port}`;
  return {
    endpoint,
    bucket,
    env: {
      IMAGE_STORE: 's3',
      IMAGE_S3_ENDPOINT: endpoint,
      IMAGE_S3_BUCKET: bucket,
      IMAGE_S3_ACCESS_KEY_ID: 'S3RVER',
      IMAGE_S3_SECRET_ACCESS_KEY: 'S3RVER',
    },
    async close() {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
