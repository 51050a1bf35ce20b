// Summarises V8's young collections (and every collection's pause on the main thread) from a gateway's `--trace-gc --trace-gc-nvp` output: how much of what was
// allocated survived a scavenge and how much was promoted to the old generation. A request path that lets go of its
// objects promotes about 1% of its allocation; a share near the survived share means objects that survived one
// scavenge were still reachable at the next (docs/benchmarks-history.md, "Promoted requests").
//   BENCH_NODE_FLAGS="--trace-gc --trace-gc-nvp" BENCH_STDOUT=/tmp/gc npm run bench -- --only sqlite10k --rounds 1
//   node scripts/gc-promotion.mjs /tmp/gc.*
import fs from 'node:fs';

for (const file of process.argv.slice(2)) {
  let scavenges = 0;
  let full = 0;
  const sum = { allocated: 0, new_space_survived: 0, promoted: 0 };
  /** The main thread's pause of each collection (ms), by kind: what a request in flight waits for. */
  const pauses = { s: [], mc: [], other: [] };
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const fields = Object.fromEntries([...line.matchAll(/([a-z_.]+)=([0-9.]+|[a-z]+)/g)].map(([, name, value]) => [name, value]));
    if (fields.pause !== undefined) (pauses[fields.gc] ?? pauses.other).push(Number(fields.pause));
    if (fields.gc === 'mc') full += 1;
    if (fields.gc !== 's') continue;
    scavenges += 1;
    for (const name of Object.keys(sum)) sum[name] += Number(fields[name] ?? 0);
  }
  if (scavenges === 0) continue;
  const mb = (bytes) => (bytes / 2 ** 20).toFixed(0);
  const share = (bytes) => `${((100 * bytes) / sum.allocated).toFixed(1)}%`;
  console.log(
    `${file}: ${scavenges} scavenges, ${full} full collections; allocated ${mb(sum.allocated)} MB, survived ${mb(sum.new_space_survived)} MB (${share(sum.new_space_survived)}), promoted ${mb(sum.promoted)} MB (${share(sum.promoted)})`,
  );
  for (const [kind, list] of Object.entries(pauses)) {
    if (list.length === 0) continue;
    const sorted = [...list].sort((a, b) => a - b);
    const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(2);
    const total = list.reduce((a, b) => a + b, 0);
    console.log(
      `  pauses (${kind === 's' ? 'scavenge' : kind === 'mc' ? 'mark-compact' : 'other'}): ${list.length}, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${sorted.at(-1).toFixed(2)} ms, total ${total.toFixed(0)} ms`,
    );
  }
}
