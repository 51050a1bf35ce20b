import { ImageStoreTimeout, withinDeadline } from '../../src/images/image-store';

/** Every image store operation ends by its deadline, even one that ignores its signal (a file system call on a hung volume). */
describe('withinDeadline (image store operations)', () => {
  it('rejects with ImageStoreTimeout at the deadline, and the operation is told to stop', async () => {
    let told: AbortSignal | undefined;
    const never = (signal: AbortSignal) => {
      told = signal;
      return new Promise<never>(() => undefined);
    };
    await expect(withinDeadline('put', 20, undefined, never)).rejects.toBeInstanceOf(ImageStoreTimeout);
    expect(told?.aborted).toBe(true);
  });

  it("ends with the caller's signal, with its reason", async () => {
    const caller = new AbortController();
    const running = withinDeadline('read', 60_000, caller.signal, () => new Promise<never>(() => undefined));
    caller.abort(new Error('the request ended'));
    await expect(running).rejects.toThrow('the request ended');
  });

  it("answers the operation's result or error when it ends in time", async () => {
    await expect(withinDeadline('read', 60_000, undefined, async () => 'bytes')).resolves.toBe('bytes');
    await expect(withinDeadline('delete', 60_000, undefined, async () => Promise.reject(new Error('EACCES')))).rejects.toThrow('EACCES');
  });
});
