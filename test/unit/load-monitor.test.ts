import { LoadMonitor } from '../../src/http/load-shedding';

/** The database-wait signal of load shedding: a window's shortest wait, read as CoDel reads a queue. */
describe('LoadMonitor, database wait', () => {
  const monitors: LoadMonitor[] = [];
  const monitor = (databaseWaitMs: number) => {
    const m = new LoadMonitor({ eventLoopDelayMs: 0, databaseWaitMs });
    monitors.push(m);
    return m;
  };
  afterAll(() => monitors.forEach((m) => m.close()));

  it('a window in which every piece of work waited past the threshold is overload', () => {
    const m = monitor(100);
    m.databaseWaited(150);
    m.databaseWaited(400);
    expect(m.overloaded).toBe(false);
    m.readWindow();
    expect(m.lastDatabaseWaitMs).toBe(150);
    expect(m.overloaded).toBe(true);
  });

  it('a burst (some work waited long, some did not) is not: the queue emptied', () => {
    const m = monitor(100);
    m.databaseWaited(900);
    m.databaseWaited(3);
    m.readWindow();
    expect(m.lastDatabaseWaitMs).toBe(3);
    expect(m.overloaded).toBe(false);
  });

  it('each window starts afresh, and one without database work is no wait', () => {
    const m = monitor(100);
    m.databaseWaited(500);
    m.readWindow();
    expect(m.overloaded).toBe(true);
    m.readWindow();
    expect(m.lastDatabaseWaitMs).toBe(0);
    expect(m.overloaded).toBe(false);
  });

  it('a wait equal to the threshold is not over it, and 0 turns the signal off', () => {
    const atThreshold = monitor(100);
    atThreshold.databaseWaited(100);
    atThreshold.readWindow();
    expect(atThreshold.overloaded).toBe(false);
    const off = monitor(0);
    off.databaseWaited(60_000);
    off.readWindow();
    expect(off.overloaded).toBe(false);
  });
});
