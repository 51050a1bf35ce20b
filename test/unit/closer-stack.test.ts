import { CloserStack } from '../../src/shared/closer-stack';

function recordingLogger() {
  const logged: Array<{ part: string; message: string }> = [];
  return { logged, logger: { error: (fields: { err: unknown; part: string }, message: string) => logged.push({ part: fields.part, message }) } };
}

describe('CloserStack', () => {
  it('closes the parts in reverse order of start, awaiting each before the next', async () => {
    const { logger } = recordingLogger();
    const closers = new CloserStack(logger);
    const closed: string[] = [];
    closers.push('database', () => closed.push('database'));
    closers.add('worker', {
      close: async () => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        closed.push('worker');
      },
    });
    closers.push('listeners', async () => closed.push('listeners'));
    await closers.closeAll();
    expect(closed).toEqual(['listeners', 'worker', 'database']);
  });

  it('hands back what it adds', () => {
    const closers = new CloserStack(recordingLogger().logger);
    const part = { close: () => undefined, name: 'part' };
    expect(closers.add('part', part)).toBe(part);
  });

  it('logs a failing close, still runs the others, and then reports every failure', async () => {
    const { logger, logged } = recordingLogger();
    const closers = new CloserStack(logger);
    const closed: string[] = [];
    closers.push('database', () => closed.push('database'));
    closers.push('cache', () => {
      throw new Error('cache gone');
    });
    closers.push('dispatcher', () => Promise.reject(new Error('dispatcher stuck')));
    closers.push('listeners', () => closed.push('listeners'));
    const failure = await closers.closeAll().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(closed).toEqual(['listeners', 'database']);
    expect(logged.map((entry) => entry.part)).toEqual(['dispatcher', 'cache']);
    expect(failure).toBeInstanceOf(AggregateError);
    expect((failure as AggregateError).errors.map((error: Error) => error.message)).toEqual(['dispatcher stuck', 'cache gone']);
  });

  it('closes once: a second call waits for the first and closes nothing again', async () => {
    const closers = new CloserStack(recordingLogger().logger);
    let closes = 0;
    closers.push('worker', async () => {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closes += 1;
    });
    const first = closers.closeAll();
    const second = closers.closeAll();
    await Promise.all([first, second]);
    await closers.closeAll();
    expect(closes).toBe(1);
  });
});
