import { CircuitBreaker } from '../../src/channels/resilience/circuit-breaker';
import type { Clock } from '../../src/shared/clock';

/** Opens after `threshold` consecutive failures; after `cooldownMs` one probe at a time (half-open). */
describe('CircuitBreaker', () => {
  let time: number;
  const clock: Clock = { now: () => time };
  const make = (threshold = 3, cooldownMs = 10_000) => new CircuitBreaker(threshold, cooldownMs, clock);

  beforeEach(() => {
    time = 1_000_000;
  });

  function open(breaker: CircuitBreaker, threshold = 3): void {
    for (let i = 0; i < threshold; i++) {
      expect(breaker.tryAcquire()).toBe(true);
      breaker.onFailure();
    }
    expect(breaker.state).toBe('open');
  }

  it('starts closed: every call goes through, nothing to wait for', () => {
    const breaker = make();
    expect(breaker.state).toBe('closed');
    expect(breaker.retryAfterMs()).toBe(0);
    for (let i = 0; i < 10; i++) expect(breaker.tryAcquire()).toBe(true);
  });

  it('opens at the threshold-th consecutive failure, not before', () => {
    const breaker = make(3);
    breaker.onFailure();
    breaker.onFailure();
    expect(breaker.state).toBe('closed');
    expect(breaker.tryAcquire()).toBe(true);
    breaker.onFailure();
    expect(breaker.state).toBe('open');
    expect(breaker.tryAcquire()).toBe(false);
  });

  it('a success between failures starts the count again (consecutive failures only)', () => {
    const breaker = make(3);
    breaker.onFailure();
    breaker.onFailure();
    breaker.onSuccess();
    breaker.onFailure();
    breaker.onFailure();
    expect(breaker.state).toBe('closed');
    breaker.onFailure();
    expect(breaker.state).toBe('open');
  });

  it('a neutral outcome (e.g. a content refusal) neither counts nor resets', () => {
    const breaker = make(2);
    breaker.onFailure();
    breaker.onNeutral();
    expect(breaker.state).toBe('closed');
    breaker.onFailure();
    expect(breaker.state).toBe('open');
  });

  it('threshold 1 opens at the first failure', () => {
    const breaker = make(1);
    breaker.onFailure();
    expect(breaker.state).toBe('open');
  });

  it('open: refuses calls for cooldownMs, counting down retryAfterMs', () => {
    const breaker = make(3, 10_000);
    open(breaker);
    expect(breaker.retryAfterMs()).toBe(10_000);
    time += 4_000;
    expect(breaker.state).toBe('open');
    expect(breaker.tryAcquire()).toBe(false);
    expect(breaker.retryAfterMs()).toBe(6_000);
    time += 5_999;
    expect(breaker.state).toBe('open');
    expect(breaker.retryAfterMs()).toBe(1);
    expect(breaker.tryAcquire()).toBe(false);
  });

  it('half-open exactly at cooldownMs; retryAfterMs is then 0, and never negative', () => {
    const breaker = make(3, 10_000);
    open(breaker);
    time += 10_000;
    expect(breaker.state).toBe('half_open');
    expect(breaker.retryAfterMs()).toBe(0);
    time += 60_000;
    expect(breaker.state).toBe('half_open');
    expect(breaker.retryAfterMs()).toBe(0);
  });

  it('half-open lets one probe through at a time', () => {
    const breaker = make();
    open(breaker);
    time += 10_000;
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    expect(breaker.tryAcquire()).toBe(false);
    expect(breaker.state).toBe('half_open');
  });

  it('a successful probe closes the breaker, and the failure count starts again', () => {
    const breaker = make(3);
    open(breaker);
    time += 10_000;
    expect(breaker.tryAcquire()).toBe(true);
    breaker.onSuccess();
    expect(breaker.state).toBe('closed');
    expect(breaker.retryAfterMs()).toBe(0);
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(true);
    breaker.onFailure();
    breaker.onFailure();
    expect(breaker.state).toBe('closed');
  });

  it('a failed probe opens it again at once (below the threshold), for a full cooldown from the probe', () => {
    const breaker = make(5, 10_000);
    open(breaker, 5);
    time += 12_000;
    expect(breaker.tryAcquire()).toBe(true);
    time += 500;
    breaker.onFailure();
    expect(breaker.state).toBe('open');
    expect(breaker.retryAfterMs()).toBe(10_000);
    expect(breaker.tryAcquire()).toBe(false);
    time += 10_000;
    expect(breaker.state).toBe('half_open');
    expect(breaker.tryAcquire()).toBe(true);
  });

  it('a neutral probe frees the probe slot: the next call may probe', () => {
    const breaker = make();
    open(breaker);
    time += 10_000;
    expect(breaker.tryAcquire()).toBe(true);
    breaker.onNeutral();
    expect(breaker.state).toBe('half_open');
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
  });

  it('a breaker that closed after a probe needs the full threshold again to open', () => {
    const breaker = make(2);
    open(breaker, 2);
    time += 10_000;
    breaker.tryAcquire();
    breaker.onSuccess();
    breaker.onFailure();
    expect(breaker.state).toBe('closed');
    breaker.onFailure();
    expect(breaker.state).toBe('open');
  });
});
