// Summarises what sql-timing.cjs and busy-profile.cjs write (their headers say how to run them):
//   node scripts/profiling/summarise.mjs sql <file.jsonl>      µs per request by statement, the 2 busiest windows
//   node scripts/profiling/summarise.mjs cpu <files...>        share of busy CPU by module and by function
//   node scripts/profiling/summarise.mjs alloc <files...>      KB allocated per request by module and by function
//   node scripts/profiling/summarise.mjs heap <file> <N> [<idle file> <M>]  a heap snapshot's bytes and objects per request (N held),
//                                                              by type and constructor; over a snapshot with M held when given
// "Module" is a folder of src/, an npm package, a Node.js internal module, or a native or V8 entry.
import fs from 'node:fs';

const [mode, ...files] = process.argv.slice(2);
const top = (map, count, format) => [...map].sort((a, b) => b[1] - a[1]).slice(0, count).forEach(([name, value]) => console.log(format(value).padStart(9), name));
const add = (map, key, value) => map.set(key, (map.get(key) ?? 0) + value);

function moduleOf({ url, functionName }) {
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  const npm = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (npm) return `npm:${npm[1]}`;
  const own = url.match(/dist\/src\/([^/.]+)/);
  if (own) return `src/${own[1]}`;
  return url.startsWith('node:') ? url.replace(/^node:(internal\/)?/, 'node:').split('/').slice(0, 2).join('/') : url;
}

if (mode === 'sql') {
  for (const file of files) {
    const windows = fs.readFileSync(file, 'utf8').trim().split('\n').map((line) => new Map(JSON.parse(line)));
    // Requests in a window: the generation INSERT runs once per request.
    const requestsIn = (window) => [...window].find(([sql]) => /^insert into "generations"/i.test(sql))?.[1].n ?? 0;
    const busiest = windows.sort((a, b) => requestsIn(b) - requestsIn(a)).slice(0, 2);
    const requests = busiest.reduce((sum, window) => sum + requestsIn(window), 0);
    const total = new Map();
    const calls = new Map();
    for (const window of busiest) for (const [sql, { n, us }] of window) (add(total, sql, us), add(calls, sql, n));
    console.log(`${file}: ${requests} requests, ${([...total.values()].reduce((a, b) => a + b, 0) / requests).toFixed(1)} µs/req of SQLite`);
    top(total, 15, (us) => `${(us / requests).toFixed(1)}`);
    console.log('calls per request:');
    top(calls, 15, (n) => `${(n / requests).toFixed(3)}`);
  }
} else if (mode === 'cpu' || mode === 'alloc') {
  const modules = new Map();
  const functions = new Map();
  let total = 0;
  let requests = 0;
  for (const file of files) {
    const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
    requests += Number(file.split('.').at(-2));
    const visit = (node, weight) => {
      if (weight > 0 && node.callFrame.functionName !== '(idle)') {
        const module = moduleOf(node.callFrame);
        total += weight;
        add(modules, module, weight);
        add(functions, `${module} ${node.callFrame.functionName}:${node.callFrame.lineNumber}`, weight);
      }
    };
    if (mode === 'cpu') {
      const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
      profile.samples.forEach((id, i) => visit(nodes.get(id), profile.timeDeltas[i] ?? 0));
    } else {
      const bytes = new Map();
      for (const sample of profile.samples) add(bytes, sample.nodeId, sample.size);
      const walk = (node) => (visit(node, bytes.get(node.id) ?? 0), (node.children ?? []).forEach(walk));
      walk(profile.head);
    }
  }
  const format = mode === 'cpu' ? (value) => `${((100 * value) / total).toFixed(1)}%` : (value) => `${(value / requests / 1024).toFixed(2)} KB`;
  console.log(mode === 'cpu' ? `${files.length} windows, ${(total / 1e6).toFixed(1)} s busy, ${requests} requests` : `${requests} requests, ${(total / requests / 1024).toFixed(1)} KB/req`);
  top(modules, 30, format);
  console.log('by function:');
  top(functions, 40, format);
} else if (mode === 'heap') {
  // Self sizes only (what each object holds itself). A snapshot taken while N requests are held has what the
  // process holds at idle in its totals too; given a second snapshot with fewer held (an idle one), the
  // figures are the difference between the two per request of difference.
  const [file, held, idleFile, idleHeld] = files;
  const read = (path) => {
    const snapshot = JSON.parse(fs.readFileSync(path, 'utf8'));
    const { node_fields: fields, node_types: [types] } = snapshot.snapshot.meta;
    const width = fields.length;
    const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((field) => fields.indexOf(field));
    const bytes = new Map();
    const counts = new Map();
    let total = 0;
    for (let i = 0; i < snapshot.nodes.length; i += width) {
      const type = types[snapshot.nodes[i + typeAt]];
      const name = type === 'object' || type === 'closure' || type === 'native' ? `${type} ${snapshot.strings[snapshot.nodes[i + nameAt]]}` : `(${type})`;
      const size = snapshot.nodes[i + sizeAt];
      total += size;
      add(bytes, name, size);
      add(counts, name, 1);
    }
    return { bytes, counts, total };
  };
  const loaded = read(file);
  const idle = idleFile ? read(idleFile) : { bytes: new Map(), counts: new Map(), total: 0 };
  const n = Number(held) - Number(idleHeld ?? 0);
  const delta = (map, idleMap) => new Map([...map].map(([name, value]) => [name, value - (idleMap.get(name) ?? 0)]));
  const bytes = delta(loaded.bytes, idle.bytes);
  const counts = delta(loaded.counts, idle.counts);
  const total = loaded.total - idle.total;
  console.log(`${(total / 2 ** 20).toFixed(1)} MB of heap${idleFile ? ' over the idle snapshot' : ''}, ${(total / n / 1024).toFixed(1)} KB per request held (${n})`);
  [...bytes].sort((a, b) => b[1] - a[1]).slice(0, 40).forEach(([name, size]) =>
    console.log(`${(size / n).toFixed(0).padStart(7)} B ${((counts.get(name) ?? 0) / n).toFixed(1).padStart(6)} objects  ${name}`),
  );
} else {
  console.error('usage: summarise.mjs sql|cpu|alloc <files...> | heap <file> <N> [<idle file> <M>]');
  process.exit(2);
}
