import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { StoredImageContentType } from './image-bytes';
import { type ByteRange, DEFAULT_IMAGE_STORE_TIMEOUT_MS, type ImageStore, assertImageId, withinDeadline } from './image-store';

export interface S3ImageStoreSettings {
  bucket: string;
  /** Object keys start with this (e.g. `images/`). */
  prefix: string;
  region: string;
  /** For S3-compatible servers (MinIO, R2, Ceph, s3rver); AWS itself when undefined. */
  endpoint?: string;
  /** Path-style URLs (`endpoint/bucket/key`), which most S3-compatible servers need. */
  forcePathStyle: boolean;
  /** When absent, the SDK's default chain (environment, profile, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** IMAGE_STORE_TIMEOUT_MS: the deadline of one operation, its retries included. */
  timeoutMs?: number;
}

/** The object readiness asks for; not an image id, so no image is ever stored under it. */
const READINESS_PROBE_KEY = 'readiness-probe';

/** Images as objects in an S3-compatible bucket, shared by every replica. */
export class S3ImageStore implements ImageStore {
  readonly description: string;
  private readonly client: S3Client;
  private readonly timeoutMs: number;

  constructor(private readonly settings: S3ImageStoreSettings) {
    this.description = `s3 ${settings.endpoint ?? 'aws'}/${settings.bucket}/${settings.prefix}`;
    this.timeoutMs = settings.timeoutMs ?? DEFAULT_IMAGE_STORE_TIMEOUT_MS;
    this.client = new S3Client({
      region: settings.region,
      forcePathStyle: settings.forcePathStyle,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      ...(settings.credentials ? { credentials: settings.credentials } : {}),
      // The generation fails (and is released) rather than waiting on a sick bucket for minutes.
      maxAttempts: 3,
      // Per attempt: a connection that does not open, an answer that does not come (a bucket that
      // accepts and never answers), or a socket silent this long (an object body that stops
      // mid-way) fails the attempt; withinDeadline bounds the attempts together.
      requestHandler: { connectionTimeout: this.timeoutMs, requestTimeout: this.timeoutMs, throwOnRequestTimeout: true, socketTimeout: this.timeoutMs },
    });
  }

  private keyOf(id: string): string {
    assertImageId(id);
    return `${this.settings.prefix}${id}`;
  }

  async put(id: string, bytes: Buffer, contentType: StoredImageContentType, signal?: AbortSignal): Promise<void> {
    const key = this.keyOf(id);
    await withinDeadline('put', this.timeoutMs, signal, (abortSignal) =>
      this.client.send(new PutObjectCommand({ Bucket: this.settings.bucket, Key: key, Body: bytes, ContentType: contentType, ContentLength: bytes.length }), {
        abortSignal,
      }),
    );
  }

  async read(id: string, range?: ByteRange, signal?: AbortSignal): Promise<Readable | undefined> {
    const key = this.keyOf(id);
    try {
      return await withinDeadline('read', this.timeoutMs, signal, async (abortSignal) => {
        const answer = await this.client.send(
          new GetObjectCommand({ Bucket: this.settings.bucket, Key: key, ...(range ? { Range: `bytes=${range.first}-${range.last}` } : {}) }),
          { abortSignal },
        );
        const body = answer.Body;
        if (body instanceof Readable) return body;
        if (body === undefined) return Readable.from([]);
        return Readable.from(Buffer.from(await body.transformToByteArray()));
      });
    } catch (error) {
      if ((error as { name?: string }).name === 'NoSuchKey') return undefined;
      throw error;
    }
  }

  async delete(id: string, signal?: AbortSignal): Promise<void> {
    const key = this.keyOf(id);
    // S3 answers 204 for a key that is not there, so racing sweepers are harmless.
    await withinDeadline('delete', this.timeoutMs, signal, (abortSignal) =>
      this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: key }), { abortSignal }),
    );
  }

  /**
   * One GET of a key no image has: NoSuchKey (or AccessDenied, for credentials allowed to read and
   * write objects but not to list the bucket) means the endpoint answers and took the signature.
   * Anything else fails: no route, a hung or closed endpoint, missing or wrong credentials, no such bucket.
   */
  async check(signal: AbortSignal): Promise<void> {
    try {
      const answer = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: `${this.settings.prefix}${READINESS_PROBE_KEY}` }), {
        abortSignal: signal,
      });
      if (answer.Body instanceof Readable) answer.Body.destroy();
    } catch (error) {
      const name = (error as { name?: string }).name;
      if (name === 'NoSuchKey' || name === 'AccessDenied') return;
      throw error;
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
