// Preload for a gateway process: the time of every SQLite statement, by SQL text, written every 2 s as one JSON line
// to /tmp/sql-timing.<pid>.jsonl (the counts of that window). Summarise the busiest windows with summarise.mjs:
//   BENCH_NODE_FLAGS="--require ./scripts/profiling/sql-timing.cjs" BENCH_AB_NODE_FLAGS="--require ./scripts/profiling/sql-timing.cjs" \
//     npm run bench -- --only sqlite10k --ab <other build>/dist/src/main.js --rounds 1
//   node scripts/profiling/summarise.mjs sql /tmp/sql-timing.*.jsonl
// Windows, not the whole run: at 1,000 req/s a group commit holds one or two requests, under load about twenty.
const Module = require('node:module');
const fs = require('node:fs');

const window = new Map();
const load = Module._load;
Module._load = function loadWithTiming(request, ...rest) {
  const exported = load.call(this, request, ...rest);
  if (request === 'better-sqlite3' && !exported.prototype.prepare.timed) {
    const prepare = exported.prototype.prepare;
    exported.prototype.prepare = function prepareTimed(sql, ...more) {
      const statement = prepare.call(this, sql, ...more);
      const key = sql.slice(0, 140);
      for (const method of ['run', 'all', 'get', 'iterate']) {
        const call = statement[method];
        statement[method] = function timed(...parameters) {
          const started = process.hrtime.bigint();
          try {
            return call.apply(this, parameters);
          } finally {
            const entry = window.get(key) ?? { n: 0, us: 0 };
            entry.n += 1;
            entry.us += Number(process.hrtime.bigint() - started) / 1000;
            window.set(key, entry);
          }
        };
      }
      return statement;
    };
    exported.prototype.prepare.timed = true;
  }
  return exported;
};

setInterval(() => {
  fs.appendFileSync(`/tmp/sql-timing.${process.pid}.jsonl`, `${JSON.stringify([...window])}\n`);
  window.clear();
}, 2000).unref();
