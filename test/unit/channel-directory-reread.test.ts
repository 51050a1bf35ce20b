import type { ChannelRouterDeps } from '../../src/channels/channel-runtime';
import { ChannelDirectory } from '../../src/channels/channel-directory';
import * as repo from '../../src/channels/channels.repository';

jest.mock('../../src/channels/channels.repository', () => ({ listChannelRows: jest.fn() }));

/**
 * A model the cached channel list does not serve re-reads the list (channel-wait-line.ts) before it is
 * refused; a flood of such requests must not become a flood of reads: one read at a time, and every
 * caller that arrives while one runs shares the single read that follows it.
 */
describe('ChannelDirectory.reread', () => {
  const reads: Array<() => void> = [];
  const listChannelRows = repo.listChannelRows as jest.Mock;
  beforeEach(() => {
    reads.length = 0;
    listChannelRows.mockReset();
    listChannelRows.mockImplementation(() => new Promise((resolve) => reads.push(() => resolve([]))));
  });
  const directory = () =>
    new ChannelDirectory({
      db: {},
      writes: {},
      clock: { now: () => 1_000_000 },
      logger: {},
      sealer: { isStale: () => false },
      environment: { channels: [], providers: {} },
      pollIntervalMs: 1000,
      allowPrivateUpstreams: true,
    } as unknown as Pick<ChannelRouterDeps, 'db' | 'writes' | 'clock' | 'logger' | 'sealer' | 'environment' | 'pollIntervalMs' | 'allowPrivateUpstreams'>);
  const settle = () => new Promise((resolve) => setImmediate(resolve));

  it('100 callers while a read runs cost one more read, started after it ends', async () => {
    const d = directory();
    const first = d.reread();
    const flood = Array.from({ length: 100 }, () => d.reread());
    await settle();
    expect(listChannelRows).toHaveBeenCalledTimes(1);
    reads[0]!();
    await first;
    await settle();
    expect(listChannelRows).toHaveBeenCalledTimes(2);
    reads[1]!();
    await Promise.all(flood);
    expect(listChannelRows).toHaveBeenCalledTimes(2);
  });

  it('a caller while a read runs never gets that read: it may predate what the caller must see', async () => {
    const d = directory();
    void d.channels();
    let answered = false;
    const later = d.reread().then(() => {
      answered = true;
    });
    reads[0]!();
    await settle();
    expect(answered).toBe(false);
    reads[1]!();
    await later;
    expect(answered).toBe(true);
  });
});
