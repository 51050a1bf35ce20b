import { unlessStalled } from '../helpers/unless-stalled';

/** Blocks the event loop for `ms`, as a starved process or a long GC pause would. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}
const tick = () => new Promise((resolve) => setTimeout(resolve, 30));

describe('unlessStalled (the lease tests’ guard against a starved CI machine)', () => {
  it('throws a failure of a window without a stall at once, so a broken renewal still fails', async () => {
    const rounds: number[] = [];
    // A threshold no stall of this loaded machine reaches: the first failure is final.
    await expect(
      unlessStalled(60_000, async (round) => {
        rounds.push(round);
        await tick();
        throw new Error('lease lapsed');
      }),
    ).rejects.toThrow(/lease lapsed[\s\S]*round 1 of 3/);
    expect(rounds).toEqual([1]);
  });

  it('runs again a round that failed while the event loop stalled longer than allowed', async () => {
    const rounds: number[] = [];
    await unlessStalled(200, async (round) => {
      rounds.push(round);
      await tick();
      if (round === 1) {
        stall(400);
        await tick();
        throw new Error('lease lapsed');
      }
    });
    expect(rounds).toEqual([1, 2]);
  });

  it('gives up after the last round, stalled or not', async () => {
    await expect(
      unlessStalled(
        100,
        async () => {
          await tick();
          stall(200);
          throw new Error('lease lapsed');
        },
        2,
      ),
    ).rejects.toThrow(/round 2 of 2/);
  });
});
