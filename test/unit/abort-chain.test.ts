import { AbortLink } from '../../src/shared/abort-chain';

describe('AbortLink', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("aborts with its parent's reason, and the links below it with the same", () => {
    const client = new AbortLink(undefined);
    const run = new AbortLink(client.signal);
    const request = new AbortLink(run.signal, { ms: 1_000, reason: () => new Error('timeout') });
    const gone = new Error('client gone');
    client.abort(gone);
    expect([run.signal.reason, request.signal.reason]).toEqual([gone, gone]);
    expect(request.timedOut).toBe(false);
    jest.advanceTimersByTime(1_000);
    // The deadline passing after the parent's abort does not make it a timeout.
    expect(request.timedOut).toBe(false);
    expect(request.signal.reason).toBe(gone);
  });

  it('its deadline aborts it with its own reason, and not its parent', () => {
    const parent = new AbortLink(undefined);
    const timeout = new Error('provider_timeout');
    const link = new AbortLink(parent.signal, { ms: 500, reason: () => timeout });
    jest.advanceTimersByTime(499);
    expect(link.signal.aborted).toBe(false);
    jest.advanceTimersByTime(1);
    expect(link.signal.reason).toBe(timeout);
    expect(link.timedOut).toBe(true);
    expect(parent.signal.aborted).toBe(false);
  });

  it('a parent already aborted: the link starts aborted with its reason, and sets no timer', () => {
    const parent = new AbortLink(undefined);
    parent.abort('lease lost');
    const link = new AbortLink(parent.signal, { ms: 10, reason: () => 'timeout' });
    expect(link.signal.reason).toBe('lease lost');
    expect(jest.getTimerCount()).toBe(0);
  });

  it('released: the deadline is stopped and a later parent abort no longer reaches it', () => {
    const parent = new AbortLink(undefined);
    const link = new AbortLink(parent.signal, { ms: 10, reason: () => 'timeout' });
    link.release();
    expect(jest.getTimerCount()).toBe(0);
    parent.abort('gone');
    expect(link.signal.aborted).toBe(false);
  });
});
