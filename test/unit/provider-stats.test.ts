import { ProviderStats } from '../../src/channels/resilience/provider-stats';

describe('provider stats', () => {
  it('reports nothing before the first call', () => {
    expect(new ProviderStats(4).snapshot()).toEqual({ calls: 0, error_rate: 0, latency_ms: { p50: null, p95: null, p99: null } });
  });

  it('keeps only the last `size` calls, whatever their order of arrival', () => {
    const stats = new ProviderStats(4);
    // The first two (a failure of 1,000 ms, a success of 900 ms) are pushed out by the last four.
    [
      [false, 1_000],
      [true, 900],
      [true, 10],
      [false, 40],
      [true, 30],
      [true, 20],
    ].forEach(([ok, ms]) => stats.record(ok as boolean, ms as number));
    expect(stats.snapshot()).toEqual({ calls: 4, error_rate: 0.25, latency_ms: { p50: 30, p95: 40, p99: 40 } });
  });
});
