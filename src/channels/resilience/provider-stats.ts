/** Outcomes of the last calls to one provider, for its health report. */
export class ProviderStats {
  private readonly outcomes: Array<{ ok: boolean; latencyMs: number }> = [];

  constructor(private readonly size = 200) {}

  record(ok: boolean, latencyMs: number): void {
    this.outcomes.push({ ok, latencyMs });
    if (this.outcomes.length > this.size) this.outcomes.shift();
  }

  snapshot(): { calls: number; error_rate: number; latency_ms: { p50: number | null; p95: number | null; p99: number | null } } {
    const calls = this.outcomes.length;
    const latencies = this.outcomes.map((o) => o.latencyMs).sort((a, b) => a - b);
    const pick = (q: number) => (calls === 0 ? null : (latencies[Math.min(calls - 1, Math.floor(q * calls))] as number));
    return {
      calls,
      error_rate: calls === 0 ? 0 : this.outcomes.filter((o) => !o.ok).length / calls,
      latency_ms: { p50: pick(0.5), p95: pick(0.95), p99: pick(0.99) },
    };
  }
}
