import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { StoredImageContentType } from './image-bytes';
import { type ByteRange, type ImageStore, assertImageId } from './image-store';

/**
 * Images as files in a directory (default ./data/images), fanned out by two characters of the id
 * so no directory grows past a few thousand entries. Writes go to a temporary file that is
 * fsynced and renamed, so a reader never sees half an image.
 */
export class DirectoryImageStore implements ImageStore {
  readonly description: string;

  constructor(private readonly directory: string) {
    this.description = `directory ${directory}`;
  }

  private pathOf(id: string): string {
    assertImageId(id);
    return path.join(this.directory, id.slice(-2), id);
  }

  async put(id: string, bytes: Buffer, _contentType: StoredImageContentType): Promise<void> {
    const target = this.pathOf(id);
    await fs.promises.mkdir(path.dirname(target), { recursive: true });
    const temporary = `${target}.${randomUUID()}.tmp`;
    const handle = await fs.promises.open(temporary, 'w', 0o640);
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.promises.rename(temporary, target);
    } catch (error) {
      await fs.promises.rm(temporary, { force: true });
      throw error;
    }
  }

  async read(id: string, range?: ByteRange): Promise<Readable | undefined> {
    let handle: fs.promises.FileHandle;
    try {
      handle = await fs.promises.open(this.pathOf(id), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    return handle.createReadStream(range ? { start: range.first, end: range.last } : {});
  }

  async delete(id: string): Promise<void> {
    await fs.promises.rm(this.pathOf(id), { force: true });
  }

  async close(): Promise<void> {}
}
