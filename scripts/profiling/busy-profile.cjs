// Preload for a gateway process: a CPU profile (PROFILE=cpu, the default) or a sampling allocation profile
// (PROFILE=alloc, collected objects included) of each window of WINDOW_MS (default 2000) in which the process used
// more than 85% of a core, written to /tmp/busy-profile/<pid>.<n>.<requests served in the window>.<kind>; quiet
// windows (warm-up, the fixed-rate phase, the other build's turn) are discarded.
//   BENCH_NODE_FLAGS="--require ./scripts/profiling/busy-profile.cjs" npm run bench -- --only sqlite10k --rounds 2
//   node scripts/profiling/summarise.mjs cpu /tmp/busy-profile/<pid>.*.cpuprofile
//   node scripts/profiling/summarise.mjs alloc /tmp/busy-profile/<pid>.*.heapprofile
// The profiler's own cost is in the numbers (a few % at the default 1 ms CPU sampling): compare shares, not µs.
const inspector = require('node:inspector');
const diagnostics = require('node:diagnostics_channel');
const fs = require('node:fs');

const kind = process.env.PROFILE === 'alloc' ? 'heapprofile' : 'cpuprofile';
const dir = '/tmp/busy-profile';
fs.mkdirSync(dir, { recursive: true });
const session = new inspector.Session();
session.connect();
const [start, stop] =
  kind === 'cpuprofile'
    ? [() => session.post('Profiler.start'), (done) => session.post('Profiler.stop', done)]
    : [
        () => session.post('HeapProfiler.startSampling', { samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }),
        (done) => session.post('HeapProfiler.stopSampling', done),
      ];
session.post(kind === 'cpuprofile' ? 'Profiler.enable' : 'HeapProfiler.enable', start);

let requests = 0;
diagnostics.subscribe('http.server.request.start', () => {
  requests += 1;
});
let window = 0;
let cpu = process.cpuUsage();
let at = process.hrtime.bigint();
let served = 0;
setInterval(() => {
  const now = process.hrtime.bigint();
  const used = process.cpuUsage(cpu);
  const busy = (used.user + used.system) / (Number(now - at) / 1000) > 0.85;
  const count = requests - served;
  cpu = process.cpuUsage();
  at = now;
  served = requests;
  stop((error, result) => {
    if (!error && busy) fs.writeFileSync(`${dir}/${process.pid}.${String(window++).padStart(4, '0')}.${count}.${kind}`, JSON.stringify(result.profile));
    start();
  });
}, Number(process.env.WINDOW_MS ?? 2000)).unref();
