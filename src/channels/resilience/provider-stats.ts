/** Outcomes of the last calls to one provider, for its health report: a ring of the last `size`, written once per call. */
export class ProviderStats {
  private readonly ok: boolean[] = [];
  private readonly latencies: number[] = [];
  private next = 0;

  constructor(private readonly size = 200) {}

  record(ok: boolean, latencyMs: number): void {
    this.ok[this.next] = ok;
    this.latencies[this.next] = latencyMs;
    this.next = (this.next + 1) % this.size;
  }

  snapshot(): { calls: number; error_rate: number; latency_ms: { p50: number | null; p95: number | null; p99: number | null } } {
    const calls = this.latencies.length;
    const latencies = [...this.latencies].sort((a, b) => a - b);
    const pick = (q: number) => (calls === 0 ? null : (latencies[Math.min(calls - 1, Math.floor(q * calls))] as number));
    return {
      calls,
      error_rate: calls === 0 ? 0 : this.ok.filter((ok) => !ok).length / calls,
      latency_ms: { p50: pick(0.5), p95: pick(0.95), p99: pick(0.99) },
    };
  }
}
