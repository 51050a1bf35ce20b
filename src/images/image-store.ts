import type { Readable } from 'node:stream';
import type { StoredImageContentType } from './image-bytes';

/** Bytes first..last, both inclusive (HTTP's byte ranges). */
export interface ByteRange {
  first: number;
  last: number;
}

/**
 * Where image bytes live, by image id. Two implementations pass the same tests
 * (test/images/image-store.test.ts): a directory (one process or a shared volume) and
 * S3-compatible object storage (several replicas). Metadata (type, size, expiry) is in the
 * database; a store holds only bytes. Callers (request path, sweeper, later the job workers) never
 * need to know which one they have.
 */
export interface ImageStore {
  /** For logs and /readyz-style reporting. */
  readonly description: string;
  /** Stores the bytes under `id`, replacing any; resolves once they are durable. */
  put(id: string, bytes: Buffer, contentType: StoredImageContentType): Promise<void>;
  /** The bytes (or one range of them); undefined when nothing is stored under `id`. */
  read(id: string, range?: ByteRange): Promise<Readable | undefined>;
  /** Removes the bytes; removing what is not there is not an error (sweepers may race). */
  delete(id: string): Promise<void>;
  close(): Promise<void>;
  /** For stores across a network (S3): resolves when the store answers and accepts the credentials now. */
  check?(signal: AbortSignal): Promise<void>;
}

/** Image ids are `img_` + base62 (ours); anything else must never reach a path or object key. */
export function assertImageId(id: string): void {
  if (!/^img_[0-9A-Za-z]{1,64}$/.test(id)) throw new Error(`not an image id: ${JSON.stringify(id)}`);
}
