import { DatabaseDeadlineExceeded, markCommittedNothing, mayHaveCommitted } from '../../src/db/bounded-pool';
import { DependencyUnavailableError, dependencyApiError, withChargeOutcome } from '../../src/errors/dependency-errors';

/** Issue #29 §7: what a dependency_unavailable may promise, by what the request had sent. */
describe('dependency_unavailable by phase', () => {
  const outage = new DependencyUnavailableError('database', Object.assign(new Error('Connection terminated unexpectedly'), {}));

  it('before any charging write: not charged, no generation named', () => {
    const error = dependencyApiError(outage);
    expect(error?.message).toMatch(/not charged/);
    expect(error?.details).toEqual({ dependency: 'database' });
  });

  it('a held reservation that may commit late: not charged, released within the lease, the generation named', () => {
    const error = dependencyApiError(withChargeOutcome(outage, { kind: 'reservation', generationId: 'gen_a', releasedWithinSeconds: 30 }));
    expect(error?.message).toMatch(/not charged.*gen_a is released within 30 s/);
    expect(error?.details).toEqual({ dependency: 'database', generation_id: 'gen_a', charged: 'no' });
  });

  it('a settlement sent and unanswered: never "not charged"; the outcome is unknown and the lookup named', () => {
    const error = dependencyApiError(withChargeOutcome(outage, { kind: 'unknown', generationId: 'gen_b' }));
    expect(error?.message).not.toMatch(/not charged/);
    expect(error?.message).toContain('GET /generations/gen_b');
    expect(error?.details).toEqual({ dependency: 'database', generation_id: 'gen_b', charged: 'unknown' });
    expect(error?.headers['Retry-After']).toBe('2');
  });

  it('mayHaveCommitted: only what was never sent, or was answered as failed, is known to have changed nothing', () => {
    expect(mayHaveCommitted(new DependencyUnavailableError('database', new DatabaseDeadlineExceeded('hung', false)))).toBe(false);
    expect(mayHaveCommitted(new DependencyUnavailableError('database', new DatabaseDeadlineExceeded('hung', true)))).toBe(true);
    expect(mayHaveCommitted(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(mayHaveCommitted(Object.assign(new Error('disk full'), { code: 'SQLITE_FULL' }))).toBe(false);
    expect(mayHaveCommitted(markCommittedNothing(new Error('Connection terminated unexpectedly')))).toBe(false);
    expect(mayHaveCommitted(outage)).toBe(true);
  });
});
