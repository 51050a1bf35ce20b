import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { StoredImageContentType } from './image-bytes';
import { type ByteRange, DEFAULT_IMAGE_STORE_TIMEOUT_MS, type ImageStore, assertImageId, withinDeadline } from './image-store';

/**
 * Images as files in a directory (default ./data/images), fanned out by two characters of the id
 * so no directory grows past a few thousand entries. Writes go to a temporary file that is
 * fsynced and renamed, so a reader never sees half an image.
 */
export class DirectoryImageStore implements ImageStore {
  readonly description: string;

  constructor(
    private readonly directory: string,
    /** IMAGE_STORE_TIMEOUT_MS: a volume that stops answering (a hung network mount) fails the operation after this. */
    private readonly timeoutMs: number = DEFAULT_IMAGE_STORE_TIMEOUT_MS,
  ) {
    this.description = `directory ${directory}`;
  }

  private pathOf(id: string): string {
    assertImageId(id);
    return path.join(this.directory, id.slice(-2), id);
  }

  async put(id: string, bytes: Buffer, _contentType: StoredImageContentType, signal?: AbortSignal): Promise<void> {
    const target = this.pathOf(id);
    await withinDeadline('put', this.timeoutMs, signal, async (aborted) => {
      await fs.promises.mkdir(path.dirname(target), { recursive: true });
      const temporary = `${target}.${randomUUID()}.tmp`;
      const handle = await fs.promises.open(temporary, 'w', 0o640);
      try {
        await handle.writeFile(bytes, { signal: aborted });
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        // Past the deadline the caller has its answer: the image must not appear after it.
        aborted.throwIfAborted();
        await fs.promises.rename(temporary, target);
      } catch (error) {
        await fs.promises.rm(temporary, { force: true });
        throw error;
      }
    });
  }

  async read(id: string, range?: ByteRange, signal?: AbortSignal): Promise<Readable | undefined> {
    const file = this.pathOf(id);
    return withinDeadline('read', this.timeoutMs, signal, async (aborted) => {
      let handle: fs.promises.FileHandle;
      try {
        handle = await fs.promises.open(file, 'r');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
      if (aborted.aborted) {
        await handle.close();
        aborted.throwIfAborted();
      }
      return handle.createReadStream(range ? { start: range.first, end: range.last } : {});
    });
  }

  async delete(id: string, signal?: AbortSignal): Promise<void> {
    const file = this.pathOf(id);
    await withinDeadline('delete', this.timeoutMs, signal, () => fs.promises.rm(file, { force: true }));
  }

  async close(): Promise<void> {}
}
