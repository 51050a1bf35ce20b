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
  /**
   * Stores the bytes under `id`, replacing any; resolves once they are durable. Every operation
   * ends by the store's deadline (IMAGE_STORE_TIMEOUT_MS) or `signal`, whichever comes first,
   * rejecting with ImageStoreTimeout at the deadline: a hung store never holds its caller longer.
   */
  put(id: string, bytes: Buffer, contentType: StoredImageContentType, signal?: AbortSignal): Promise<void>;
  /** The bytes (or one range of them); undefined when nothing is stored under `id`. The deadline bounds the wait for the first bytes. */
  read(id: string, range?: ByteRange, signal?: AbortSignal): Promise<Readable | undefined>;
  /** Removes the bytes; removing what is not there is not an error (sweepers may race). */
  delete(id: string, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
  /** For stores across a network (S3): resolves when the store answers and accepts the credentials now. */
  check?(signal: AbortSignal): Promise<void>;
}

/** Image ids are `img_` + base62 (ours); anything else must never reach a path or object key. */
export function assertImageId(id: string): void {
  if (!/^img_[0-9A-Za-z]{1,64}$/.test(id)) throw new Error(`not an image id: ${JSON.stringify(id)}`);
}

/** An image store's default deadline per operation (IMAGE_STORE_TIMEOUT_MS). */
export const DEFAULT_IMAGE_STORE_TIMEOUT_MS = 10_000;

/** A store operation that did not end by the store's deadline (it was aborted). */
export class ImageStoreTimeout extends Error {
  constructor(operation: string, timeoutMs: number) {
    super(`the image store's ${operation} did not end within ${timeoutMs} ms`);
    this.name = 'ImageStoreTimeout';
  }
}

/**
 * Runs one store operation under a deadline and the caller's signal: the operation gets a signal
 * that aborts at either, and the answer does not wait for an operation that ignores its signal (a
 * file system call on a hung network volume cannot be aborted).
 */
export async function withinDeadline<T>(
  operation: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  const deadline = new AbortController();
  const combined = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(combined.reason);
    combined.addEventListener('abort', onAbort, { once: true });
  });
  const timer = setTimeout(() => deadline.abort(new ImageStoreTimeout(operation, timeoutMs)), timeoutMs);
  const running = run(combined);
  // The loser of the race below must not surface as an unhandled rejection.
  running.catch(() => undefined);
  aborted.catch(() => undefined);
  try {
    return await Promise.race([running, aborted]);
  } finally {
    clearTimeout(timer);
    if (onAbort) combined.removeEventListener('abort', onAbort);
  }
}
