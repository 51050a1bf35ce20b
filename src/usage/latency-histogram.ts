/**
 * The fixed log-scale latency histogram every rollup row keeps (columns lat_00 ... lat_47), so
 * percentiles of any group are read from the sum of its rows' histograms. Bucket 0 holds runs under
 * 16 ms; bucket i (1 <= i < 47) holds [16 * 2^((i-1)/3), 16 * 2^(i/3)) ms, each about 1.26 times
 * wider than the last; bucket 47 holds everything from about 11 minutes on. A percentile is
 * reported as the geometric middle of its bucket: within 2^(1/6) - 1 (about 12%) of the exact value.
 */
export const LATENCY_BUCKETS = 48;

/** The rollup columns, in bucket order. */
export const LATENCY_COLUMNS: readonly string[] = Array.from({ length: LATENCY_BUCKETS }, (_, i) => `lat_${String(i).padStart(2, '0')}`);

/** Lower bounds in whole milliseconds (exact integers, so the bucket of an integer latency never depends on rounding). */
const LOWER_BOUNDS: readonly number[] = Array.from({ length: LATENCY_BUCKETS }, (_, i) => (i === 0 ? 0 : Math.round(16 * 2 ** ((i - 1) / 3))));

export function latencyBucketOf(latencyMs: number): number {
  let low = 0;
  let high = LATENCY_BUCKETS - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if ((LOWER_BOUNDS[middle] as number) <= latencyMs) low = middle;
    else high = middle - 1;
  }
  return low;
}

/** The value a percentile falling in `bucket` is reported as. */
export function bucketValue(bucket: number): number {
  if (bucket === 0) return 8;
  const lower = LOWER_BOUNDS[bucket] as number;
  if (bucket === LATENCY_BUCKETS - 1) return lower;
  return Math.round(Math.sqrt(lower * (LOWER_BOUNDS[bucket + 1] as number)));
}

/** The nearest-rank `percentile` (0-100) of a summed histogram, or null when it is empty. */
export function percentileOf(counts: readonly number[], percentile: number): number | null {
  const total = counts.reduce((sum, count) => sum + count, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil((percentile / 100) * total));
  let seen = 0;
  for (let bucket = 0; bucket < counts.length; bucket += 1) {
    seen += counts[bucket] as number;
    if (seen >= rank) return bucketValue(bucket);
  }
  return bucketValue(counts.length - 1);
}

export function latencyPercentiles(counts: readonly number[]): { p50: number | null; p95: number | null; p99: number | null } {
  return { p50: percentileOf(counts, 50), p95: percentileOf(counts, 95), p99: percentileOf(counts, 99) };
}
