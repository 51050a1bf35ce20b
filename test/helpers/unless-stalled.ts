/**
 * Lease tests assert that a lease renewed by its holder never lapses. A lease does lapse, by design,
 * when its holder does not run for longer than the lease: a CPU-starved CI machine or a long GC pause
 * of a jest worker that has run many files. Such a test is evidence only for a window in which the
 * process ran. `unlessStalled` runs `attempt` while watching the event loop, and runs it again (it
 * must start afresh each time) only when it failed in a window where the loop stalled longer than
 * `maxStallMs`; a failure without such a stall is thrown at once, so a broken renewal still fails.
 */
export async function unlessStalled(maxStallMs: number, attempt: (round: number) => Promise<void>, rounds = 3): Promise<void> {
  for (let round = 1; ; round += 1) {
    const watch = watchEventLoop();
    try {
      await attempt(round);
      return;
    } catch (error) {
      const longest = watch.longestStallMs();
      if (longest <= maxStallMs || round >= rounds) {
        if (error instanceof Error) error.message += `\n(longest event-loop stall meanwhile: ${longest} ms, round ${round} of ${rounds})`;
        throw error;
      }
      process.stderr.write(`unlessStalled: round ${round} failed while the event loop stalled ${longest} ms (> ${maxStallMs} ms); running it again\n`);
    } finally {
      watch.stop();
    }
  }
}

const TICK_MS = 10;

/** The longest delay of a 10 ms timer beyond its period, i.e. the longest time the process did not run. */
function watchEventLoop(): { longestStallMs(): number; stop(): void } {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last - TICK_MS);
    last = now;
  }, TICK_MS).unref();
  return {
    longestStallMs: () => Math.round(Math.max(longest, performance.now() - last - TICK_MS)),
    stop: () => clearInterval(timer),
  };
}
