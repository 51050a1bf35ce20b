import { StatementBatcher } from '../../src/db/statement-batcher';

/** A batcher whose statements are answered by the test: each call waits until released. */
function recordingBatcher(
  options: {
    maxBatch: number;
    lanes: number;
    conflictKey?: (item: number) => string;
    retryAlone?: (error: unknown) => boolean;
    deadline?: { ms: number; timedOut: (sent: boolean) => unknown };
  },
  failing = new Set<number>(),
) {
  const calls: Array<{ kind: 'one' | 'batch'; items: number[]; release: () => void }> = [];
  const run = (kind: 'one' | 'batch', items: number[]) =>
    new Promise<void>((resolve) => calls.push({ kind, items, release: resolve })).then(() => {
      const bad = items.find((item) => failing.has(item));
      if (bad !== undefined) throw new Error(`item ${bad} is bad`);
      return items.map((item) => item * 10);
    });
  const batcher = new StatementBatcher<number, number>(
    (items) => run('batch', items),
    async (item) => (await run('one', [item]))[0]!,
    options,
  );
  return { batcher, calls };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('StatementBatcher', () => {
  it('runs a lone item as its own statement', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 1 });
    const answer = batcher.submit(1);
    await turn();
    expect(calls.map((c) => [c.kind, c.items])).toEqual([['one', [1]]]);
    calls[0]!.release();
    await expect(answer).resolves.toBe(10);
  });

  it('sends what arrives while its lanes are busy as one statement, in order, at most maxBatch items each', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 3, lanes: 1 });
    const first = batcher.submit(1);
    await turn();
    const waiting = [2, 3, 4, 5].map((item) => batcher.submit(item));
    await turn();
    // The lane is busy: nothing else was sent.
    expect(calls).toHaveLength(1);
    calls[0]!.release();
    await first;
    await turn();
    expect(calls.map((c) => [c.kind, c.items])).toEqual([
      ['one', [1]],
      ['batch', [2, 3, 4]],
    ]);
    calls[1]!.release();
    await turn();
    await turn();
    expect(calls[2]).toMatchObject({ kind: 'one', items: [5] });
    calls[2]!.release();
    await expect(Promise.all(waiting)).resolves.toEqual([20, 30, 40, 50]);
  });

  it('uses every lane before it batches', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 2 });
    const a = batcher.submit(1);
    await turn();
    const b = batcher.submit(2);
    await turn();
    expect(calls.map((c) => [c.kind, c.items])).toEqual([
      ['one', [1]],
      ['one', [2]],
    ]);
    for (const call of calls) call.release();
    await expect(Promise.all([a, b])).resolves.toEqual([10, 20]);
  });

  it('when a batch fails, runs each of its items alone: only the bad one fails', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 1 }, new Set([3]));
    const first = batcher.submit(1);
    await turn();
    const rest = [2, 3, 4].map((item) =>
      batcher.submit(item).then(
        (value) => ({ value }),
        (error: Error) => ({ error: error.message }),
      ),
    );
    calls[0]!.release();
    await first;
    await turn();
    expect(calls[1]).toMatchObject({ kind: 'batch', items: [2, 3, 4] });
    calls[1]!.release();
    for (let i = 0; i < 5 && calls.length < 5; i += 1) await turn();
    expect(calls.slice(2).map((c) => [c.kind, c.items])).toEqual([
      ['one', [2]],
      ['one', [3]],
      ['one', [4]],
    ]);
    for (const call of calls.slice(2)) call.release();
    await expect(Promise.all(rest)).resolves.toEqual([{ value: 20 }, { error: 'item 3 is bad' }, { value: 40 }]);
  });

  it('never puts two items with the same conflict key in one batch: the later waits for the next, order kept', async () => {
    // Conflict key: the item's tens (11 and 12 update the same row).
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 1, conflictKey: (item) => String(Math.floor(item / 10)) });
    const first = batcher.submit(1);
    await turn();
    const waiting = [11, 12, 21, 13, 22].map((item) => batcher.submit(item));
    calls[0]!.release();
    await first;
    await turn();
    expect(calls[1]).toMatchObject({ kind: 'batch', items: [11, 21] });
    calls[1]!.release();
    for (let i = 0; i < 3 && calls.length < 3; i += 1) await turn();
    expect(calls[2]).toMatchObject({ kind: 'batch', items: [12, 22] });
    calls[2]!.release();
    for (let i = 0; i < 3 && calls.length < 4; i += 1) await turn();
    expect(calls[3]).toMatchObject({ kind: 'one', items: [13] });
    calls[3]!.release();
    await expect(Promise.all(waiting)).resolves.toEqual([110, 120, 210, 130, 220]);
  });

  it('never runs two items with the same conflict key in two lanes at once', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 2, conflictKey: (item) => String(Math.floor(item / 10)) });
    const first = batcher.submit(11);
    await turn();
    // The second lane is free, but 12 conflicts with 11 in flight: only 21 goes.
    const waiting = [12, 21].map((item) => batcher.submit(item));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[11], [21]]);
    calls[0]!.release();
    await first;
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[11], [21], [12]]);
    calls[1]!.release();
    calls[2]!.release();
    await expect(Promise.all(waiting)).resolves.toEqual([120, 210]);
  });

  it('a failure that retryAlone declines fails every item of the batch with it, none sent again', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 1, retryAlone: () => false }, new Set([2]));
    const first = batcher.submit(1);
    await turn();
    const rest = [2, 3].map((item) => batcher.submit(item).catch((error: Error) => error.message));
    calls[0]!.release();
    await first;
    await turn();
    calls[1]!.release();
    await expect(Promise.all(rest)).resolves.toEqual(['item 2 is bad', 'item 2 is bad']);
    expect(calls).toHaveLength(2);
  });

  it('a batch answered with the wrong number of results is run again item by item', async () => {
    const runOne = jest.fn(async (item: number) => item * 10);
    const batcher = new StatementBatcher<number, number>(async (items) => items.slice(1).map((item) => item), runOne, { maxBatch: 10, lanes: 1 });
    await expect(Promise.all([1, 2, 3].map((item) => batcher.submit(item)))).resolves.toEqual([10, 20, 30]);
    expect(runOne).toHaveBeenCalledTimes(3);
  });

  it('bounds every wait (issue #29 §7): behind a hung lane, a queued item is dropped unsent and the one in flight is answered "sent"', async () => {
    const { batcher, calls } = recordingBatcher({ maxBatch: 10, lanes: 1, deadline: { ms: 100, timedOut: (sent) => new Error(sent ? 'sent' : 'not sent') } });
    const first = batcher.submit(1);
    await turn();
    const second = batcher.submit(2);
    await expect(first).rejects.toThrow(/^sent$/);
    await expect(second).rejects.toThrow(/^not sent$/);
    // The hung statement answers at last: the lane frees, and the dropped item is never sent.
    calls[0]?.release();
    await turn();
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1]]);
  });
});
